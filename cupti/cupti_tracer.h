// Drives CUPTI for one capture window at a time: subscribes (CUPTI allows one subscriber per process; if a
// framework's own tracer holds it, the window reports CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED and
// leaves the framework alone), enables the activity kinds, hands CUPTI bounded buffers, converts completed
// buffers as they arrive, and at the end flushes, disables and returns the window's XSpace.
// CUPTI's buffer callbacks carry no user pointer, so there is one tracer per process (instance()).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cupti/convert/activity_converter.h"
#include "cupti/buffer_pool.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::cupti {

class CuptiTracer {
 public:
  static CuptiTracer& instance();

  // Starts tracing. Failures (no GPU: cuptiActivityEnable fails; another subscriber) are logged to stderr
  // once and land as warnings in the window's XSpace; the traced program is never disturbed.
  void open_window();
  // Stops tracing and returns everything traced since open_window(), plus warnings.
  tensorflow::profiler::XSpace close_window();
  bool window_open() const;
  // An NVTX range that ended while the window was open (host clock).
  void add_nvtx_range(uint32_t thread_id, std::string_view name, int64_t start_ns, int64_t end_ns);

  // CUPTI's buffer callbacks (C ABI trampolines call these).
  void buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
  void buffer_completed(uint8_t* buffer, size_t valid_size);

 private:
  CuptiTracer();
  void warn(std::string message);  // under mu_

  BufferPool pool_;
  mutable std::mutex mu_;
  bool open_ = false;
  bool subscribed_ = false;
  void* subscriber_ = nullptr;  // CUpti_SubscriberHandle
  std::vector<int> enabled_kinds_;
  std::unique_ptr<ActivityConverter> converter_;
  uint64_t dropped_records_ = 0;
};

}  // namespace podscope::cupti
