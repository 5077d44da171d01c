#include "cupti/cupti_tracer.h"

#include <cupti.h>

#include <cstdio>

#include "daemon/clock.h"

namespace podscope::cupti {
namespace {

// 16 × 4 MiB: enough for ~1M kernel records in flight, and a hard cap on what tracing may cost.
constexpr size_t kBufferBytes = 4u << 20;
constexpr size_t kMaxBuffers = 16;

struct KindToTrace {
  CUpti_ActivityKind kind;
  const char* name;
};
constexpr KindToTrace kKinds[] = {
    // Each device's limits, for the kernels' theoretical occupancy (CUPTI writes one record per device at enable).
    {CUPTI_ACTIVITY_KIND_DEVICE, "DEVICE"},
    {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"},
    {CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"},
    {CUPTI_ACTIVITY_KIND_MEMCPY2, "MEMCPY2"},
    {CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"},
    {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"},
    {CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"},
    {CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"},
    // Allocations and releases of device, pinned and managed memory, for the memory profile.
    {CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2"},
};

std::string result_text(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  return std::string(text) + " (" + std::to_string(static_cast<int>(result)) + ")";
}

std::string api_name(CUpti_ActivityKind kind, CUpti_CallbackId cbid) {
  const CUpti_CallbackDomain domain =
      kind == CUPTI_ACTIVITY_KIND_RUNTIME ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API;
  const char* name = nullptr;
  if (cuptiGetCallbackName(domain, cbid, &name) == CUPTI_SUCCESS && name != nullptr) return name;
  return (kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "cudaRuntime#" : "cuDriver#") + std::to_string(cbid);
}

void CUPTIAPI on_buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  CuptiTracer::instance().buffer_requested(buffer, size, max_records);
}

void CUPTIAPI on_buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_size) {
  CuptiTracer::instance().buffer_completed(buffer, valid_size);
}

// The subscription only claims CUPTI for this window (and detects a framework that already has it).
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

int64_t host_minus_cupti_ns() {
  uint64_t cupti_now = 0;
  if (cuptiGetTimestamp(&cupti_now) != CUPTI_SUCCESS) return 0;
  return Clock().now_ns() - static_cast<int64_t>(cupti_now);
}

}  // namespace

CuptiTracer& CuptiTracer::instance() {
  static CuptiTracer* tracer = new CuptiTracer();  // never destroyed: CUPTI may call back during exit
  return *tracer;
}

CuptiTracer::CuptiTracer()
    : pool_(kBufferBytes, kMaxBuffers), converter_(std::make_unique<ActivityConverter>(0, api_name)) {}

void CuptiTracer::warn(std::string message) {
  std::fprintf(stderr, "podscope_cupti: %s\n", message.c_str());
  converter_->add_warning("CUPTI: " + std::move(message));
}

bool CuptiTracer::window_open() const {
  std::lock_guard lock(mu_);
  return open_;
}

void CuptiTracer::open_window() {
  std::lock_guard lock(mu_);
  if (open_) return;
  open_ = true;
  dropped_records_ = 0;
  converter_ = std::make_unique<ActivityConverter>(host_minus_cupti_ns(), api_name);

  CUpti_SubscriberHandle subscriber = nullptr;
  const CUptiResult subscribed = cuptiSubscribe(&subscriber, on_callback, nullptr);
  if (subscribed == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
    warn("another CUPTI subscriber holds this process (the framework's own GPU tracer?): " + result_text(subscribed) +
         "; podscope leaves it alone and traces no GPU activity in this window");
    return;
  }
  if (subscribed != CUPTI_SUCCESS) {
    warn("cuptiSubscribe failed: " + result_text(subscribed) + "; no GPU activity in this window");
    return;
  }
  subscribed_ = true;
  subscriber_ = subscriber;
  if (CUptiResult r = cuptiActivityRegisterCallbacks(on_buffer_requested, on_buffer_completed); r != CUPTI_SUCCESS) {
    warn("cuptiActivityRegisterCallbacks failed: " + result_text(r));
    return;
  }
  for (const auto& k : kKinds) {
    const CUptiResult r = cuptiActivityEnable(k.kind);
    if (r == CUPTI_SUCCESS) {
      enabled_kinds_.push_back(k.kind);
    } else {
      warn(std::string("cuptiActivityEnable(") + k.name + ") failed: " + result_text(r) +
           (r == CUPTI_ERROR_UNKNOWN ? " (no usable GPU or driver?)" : ""));
    }
  }
}

tensorflow::profiler::XSpace CuptiTracer::close_window() {
  std::unique_lock lock(mu_);
  tensorflow::profiler::XSpace space;
  if (!open_) return space;
  if (!enabled_kinds_.empty()) {
    // The flush delivers the last buffers through buffer_completed(), which takes mu_.
    lock.unlock();
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    lock.lock();
    for (int kind : enabled_kinds_) cuptiActivityDisable(static_cast<CUpti_ActivityKind>(kind));
    enabled_kinds_.clear();
  }
  if (subscribed_) {
    cuptiUnsubscribe(static_cast<CUpti_SubscriberHandle>(subscriber_));
    subscribed_ = false;
  }
  if (dropped_records_ > 0) {
    warn(std::to_string(dropped_records_) + " activity records dropped: all " + std::to_string(kMaxBuffers) +
         " buffers of " + std::to_string(kBufferBytes >> 20) + " MiB were in flight");
  }
  open_ = false;
  converter_->finish(space);
  return space;
}

void CuptiTracer::add_nvtx_range(uint32_t thread_id, std::string_view name, int64_t start_ns, int64_t end_ns) {
  std::lock_guard lock(mu_);
  if (open_) converter_->add_nvtx_range(thread_id, name, start_ns, end_ns);
}

void CuptiTracer::buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = pool_.take();
  *size = *buffer ? pool_.buffer_bytes() : 0;
  *max_records = 0;  // as many as fit
}

void CuptiTracer::buffer_completed(uint8_t* buffer, size_t valid_size) {
  {
    std::lock_guard lock(mu_);
    CUpti_Activity* record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid_size, &record) == CUPTI_SUCCESS) converter_->add(*record);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) dropped_records_ += dropped;
  }
  pool_.give_back(buffer);
}

}  // namespace podscope::cupti
