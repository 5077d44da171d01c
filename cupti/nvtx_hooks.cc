#include "cupti/nvtx_hooks.h"

#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cupti/cupti_tracer.h"
#include "daemon/clock.h"

namespace podscope::cupti {
namespace {

struct OpenRange {
  std::string name;  // empty: opened while no window was open (kept only so pops still match)
  int64_t start_ns = 0;
};

uint32_t thread_id() {
  thread_local const uint32_t tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return tid;
}

int64_t now_ns() { return Clock().now_ns(); }

std::string message_of(const nvtxEventAttributes_t* attributes) {
  if (attributes == nullptr) return "(nvtx range)";
  if (attributes->messageType == NVTX_MESSAGE_TYPE_ASCII && attributes->message.ascii) return attributes->message.ascii;
  return "(nvtx range)";  // registered and wide strings are not resolved
}

std::vector<OpenRange>& stack() {
  thread_local std::vector<OpenRange> ranges;
  return ranges;
}

int push(std::string name) {
  auto& s = stack();
  const bool recording = CuptiTracer::instance().window_open();
  s.push_back(recording ? OpenRange{std::move(name), now_ns()} : OpenRange{});
  return static_cast<int>(s.size()) - 1;
}

int pop() {
  auto& s = stack();
  if (s.empty()) return -1;
  OpenRange range = std::move(s.back());
  s.pop_back();
  if (!range.name.empty()) CuptiTracer::instance().add_nvtx_range(thread_id(), range.name, range.start_ns, now_ns());
  return static_cast<int>(s.size());
}

// Start/end ranges are process-wide: ended by id, possibly on another thread.
struct StartedRanges {
  std::mutex mu;
  std::unordered_map<uint64_t, OpenRange> open;
  std::atomic<uint64_t> next_id{1};
};
StartedRanges& started() {
  static StartedRanges* ranges = new StartedRanges();  // NVTX may call during exit
  return *ranges;
}

nvtxRangeId_t start(std::string name) {
  auto& r = started();
  const uint64_t id = r.next_id.fetch_add(1);
  if (CuptiTracer::instance().window_open()) {
    std::lock_guard lock(r.mu);
    r.open[id] = {std::move(name), now_ns()};
  }
  return id;
}

void end(nvtxRangeId_t id) {
  auto& r = started();
  OpenRange range;
  {
    std::lock_guard lock(r.mu);
    auto it = r.open.find(id);
    if (it == r.open.end()) return;
    range = std::move(it->second);
    r.open.erase(it);
  }
  CuptiTracer::instance().add_nvtx_range(thread_id(), range.name, range.start_ns, now_ns());
}

int NVTX_API range_push_a(const char* message) { return push(message ? message : "(nvtx range)"); }
int NVTX_API range_push_ex(const nvtxEventAttributes_t* attributes) { return push(message_of(attributes)); }
int NVTX_API range_pop() { return pop(); }
nvtxRangeId_t NVTX_API range_start_a(const char* message) { return start(message ? message : "(nvtx range)"); }
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* attributes) { return start(message_of(attributes)); }
void NVTX_API range_end(nvtxRangeId_t id) { end(id); }
int NVTX_API domain_range_push_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  return push(message_of(attributes));
}
int NVTX_API domain_range_pop(nvtxDomainHandle_t) { return pop(); }
nvtxRangeId_t NVTX_API domain_range_start_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* attributes) {
  return start(message_of(attributes));
}
void NVTX_API domain_range_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }

template <typename Fn>
void set_slot(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (id < size && table[id] != nullptr) *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

}  // namespace

int install_nvtx_hooks(const void* (*get_export_table)(unsigned int export_table_id)) {
  if (get_export_table == nullptr) return 0;
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->GetModuleFunctionTable == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == nullptr) return 0;
  set_slot(table, size, NVTX_CBID_CORE_RangePushA, range_push_a);
  set_slot(table, size, NVTX_CBID_CORE_RangePushEx, range_push_ex);
  set_slot(table, size, NVTX_CBID_CORE_RangePop, range_pop);
  set_slot(table, size, NVTX_CBID_CORE_RangeStartA, range_start_a);
  set_slot(table, size, NVTX_CBID_CORE_RangeStartEx, range_start_ex);
  set_slot(table, size, NVTX_CBID_CORE_RangeEnd, range_end);
  // Domain ranges (NCCL, PyTorch's domains) live in the CORE2 module.
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &table, &size) != 0 && table != nullptr) {
    set_slot(table, size, NVTX_CBID_CORE2_DomainRangePushEx, domain_range_push_ex);
    set_slot(table, size, NVTX_CBID_CORE2_DomainRangePop, domain_range_pop);
    set_slot(table, size, NVTX_CBID_CORE2_DomainRangeStartEx, domain_range_start_ex);
    set_slot(table, size, NVTX_CBID_CORE2_DomainRangeEnd, domain_range_end);
  }
  return 1;
}

}  // namespace podscope::cupti
