// Entry points of libpodscope_cupti.so.
//   InitializeInjection       CUDA calls it at cuInit when CUDA_INJECTION64_PATH names this library.
//   InitializeInjectionNvtx2  NVTX calls it at the first NVTX call when NVTX_INJECTION64_PATH names it.
// Two modes, chosen by the environment:
//   PODSCOPE_CUPTI_TRACE_FILE=<path>  trace from injection to exit, write one XSpace there (atomically).
//   otherwise                         register with the local agent (libpodscope) and trace exactly while
//                                     the agent has a capture window open.
// Everything here is process-wide by nature: CUDA and NVTX inject once per process.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include "client/podscope.h"
#include "cupti/cupti_tracer.h"
#include "cupti/nvtx_hooks.h"

namespace podscope::cupti {
namespace {

const char* trace_file() {
  const char* path = std::getenv("PODSCOPE_CUPTI_TRACE_FILE");
  return path != nullptr && *path != '\0' ? path : nullptr;
}

// temp + rename, so a reader never sees half a file.
void write_trace_file() {
  const char* path = trace_file();
  const std::string bytes = CuptiTracer::instance().close_window().SerializeAsString();
  const std::string temp = std::string(path) + ".tmp." + std::to_string(getpid());
  FILE* out = std::fopen(temp.c_str(), "wb");
  const bool written = out != nullptr && std::fwrite(bytes.data(), 1, bytes.size(), out) == bytes.size();
  if (out != nullptr) std::fclose(out);
  if (!written || std::rename(temp.c_str(), path) != 0) {
    std::fprintf(stderr, "podscope_cupti: cannot write trace file %s\n", path);
    std::remove(temp.c_str());
  }
}

// Follows the agent's capture windows as libpodscope sees them (level 2 = window open). Detached: it
// lives as long as the traced process.
void follow_agent_windows() {
  podscope::init();
  std::thread([] {
    bool told_delivery = false;
    while (true) {
      const bool capture_open = podscope::detail::g_level.load(std::memory_order_relaxed) >= 2;
      auto& tracer = CuptiTracer::instance();
      if (capture_open && !tracer.window_open()) {
        tracer.open_window();
      } else if (!capture_open && tracer.window_open()) {
        tracer.close_window();
        if (!told_delivery) {
          // The local protocol has no frame for device planes yet (see docs/collectors.md).
          std::fprintf(stderr, "podscope_cupti: GPU planes of this window not sent: the agent link has no "
                               "device-plane frame yet; set PODSCOPE_CUPTI_TRACE_FILE to keep them\n");
          told_delivery = true;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }).detach();
}

}  // namespace
}  // namespace podscope::cupti

extern "C" {

__attribute__((visibility("default"))) int InitializeInjection(void) {
  static std::once_flag once;
  std::call_once(once, [] {
    if (podscope::cupti::trace_file() != nullptr) {
      podscope::cupti::CuptiTracer::instance().open_window();
      std::atexit(podscope::cupti::write_trace_file);
    } else {
      podscope::cupti::follow_agent_windows();
    }
  });
  return 1;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(const void* (*get_export_table)(unsigned int)) {
  return podscope::cupti::install_nvtx_hooks(get_export_table);
}

}  // extern "C"
