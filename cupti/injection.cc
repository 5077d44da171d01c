// Entry points of libpodscope_cupti.so.
//   InitializeInjection       CUDA calls it at cuInit when CUDA_INJECTION64_PATH names this library.
//   InitializeInjectionNvtx2  NVTX calls it at the first NVTX call when NVTX_INJECTION64_PATH names it.
// Two modes, chosen by the environment:
//   PODSCOPE_CUPTI_TRACE_FILE=<path>  trace from injection to exit, write one XSpace there (atomically).
//   otherwise                         register with the local agent through libpodscope.so (the same copy
//                                     the program may use itself: one agent connection per process), trace
//                                     exactly while the agent has a capture window open, and send the
//                                     window's planes to the agent through it.
// Everything here is process-wide by nature: CUDA and NVTX inject once per process.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

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

// Traces exactly while the agent has a capture window open, and hands the window's planes to libpodscope,
// which sends them to the agent before it reports the window done.
class AgentWindowTracer final : public podscope::CaptureWindowListener {
 public:
  void window_opened() override { CuptiTracer::instance().open_window(); }
  std::string window_closed() override { return CuptiTracer::instance().close_window().SerializeAsString(); }
};

void follow_agent_windows() {
  static AgentWindowTracer* tracer = new AgentWindowTracer();  // lives as long as the process
  podscope::add_capture_window_listener(tracer);
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
