// Stands in for a CUDA program on a machine without a GPU: loads libpodscope_cupti.so as CUDA would
// (dlopen + InitializeInjection) and makes NVTX calls, which NVTX routes to the library named by
// NVTX_INJECTION64_PATH. Usage: cupti_injection_probe <path to libpodscope_cupti.so> [run_ms]
// With run_ms, keeps making NVTX ranges for that long (so an agent can open a capture window meanwhile).
// It also uses libpodscope itself, as an annotated training program would, and calls init() only after
// CUDA's injection (cuInit before podscope::init, the harder order): there must still be one agent
// connection, carrying the job given here.
#include <dlfcn.h>
#include <nvtx3/nvToolsExt.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "client/podscope.h"

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) return 2;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 3;
  }
  auto init = reinterpret_cast<int (*)()>(dlsym(lib, "InitializeInjection"));
  if (init == nullptr || init() != 1) return 4;
  podscope::Options options;
  options.job = "cupti-probe";
  podscope::init(options);
  nvtxRangePushA("outer");
  nvtxRangePushA("inner");
  nvtxRangePop();
  nvtxRangePop();
  nvtxRangeId_t id = nvtxRangeStartA("async");
  nvtxRangeEnd(id);
  if (argc == 3) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::atoi(argv[2]));
    while (std::chrono::steady_clock::now() < end) {
      nvtxRangePushA("step");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      nvtxRangePop();
    }
  }
  std::puts("probe done");
  return 0;
}
