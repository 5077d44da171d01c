// CUPTI record → XPlane conversion throughput: how much the conversion of a capture window's
// kernel and memcpy records costs over the bare cost of writing the same events with XPlaneBuilder (the
// baseline, measured in the same run). Prints records/s for both and the ratio.
//   cupti_convert_bench [--records N]   (default 1,000,000)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cupti/convert/activity_converter.h"
#include "proto/xspace/xplane_builder.h"

namespace {

using Clock = std::chrono::steady_clock;

const char* const kKernelNames[] = {"_Z10vector_addPKfS0_Pfi", "ampere_sgemm_128x64_nn",
                                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "_ZN5cudnn6detail9conv_fpropEv"};

std::vector<CUpti_ActivityKernel10> make_kernels(size_t n) {
  std::vector<CUpti_ActivityKernel10> records(n);
  for (size_t i = 0; i < n; ++i) {
    auto& k = records[i];
    std::memset(&k, 0, sizeof(k));
    k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
    k.name = kKernelNames[i % 4];
    k.start = 1000 * i;
    k.end = 1000 * i + 700;
    k.streamId = 7 + i % 4;
    k.gridX = 256;
    k.gridY = k.gridZ = 1;
    k.blockX = 128;
    k.blockY = k.blockZ = 1;
    k.registersPerThread = 32;
    k.correlationId = static_cast<uint32_t>(i);
  }
  return records;
}

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

}  // namespace

int main(int argc, char** argv) {
  size_t n = 1'000'000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) == "--records") n = std::strtoull(argv[i + 1], nullptr, 10);
  }
  const auto records = make_kernels(n);

  // Baseline: the same events written straight through XPlaneBuilder with the name already resolved and
  // one precomputed detail string: what any converter must at least pay.
  // Both spaces are destroyed after the clocks stop: freeing a million events is not conversion work.
  tensorflow::profiler::XSpace baseline_space, converted_space;
  auto start = Clock::now();
  {
    podscope::xspace::XPlaneBuilder plane(podscope::xspace::find_or_add_plane(baseline_space, "/device:GPU:0"));
    const std::string details = "regs:32 static_shared:0 dynamic_shared:0 grid:256,1,1 block:128,1,1";
    for (const auto& k : records) {
      auto stats = plane.line(k.streamId, "Stream").add_event(k.name, int64_t(k.start), int64_t(k.end - k.start));
      stats.add("kernel_details", details);
      stats.add("correlation_id", int64_t{k.correlationId});
      stats.add("context_id", int64_t{k.contextId});
      stats.add("stream_id", int64_t{k.streamId});
    }
  }
  const double baseline_s = seconds_since(start);

  start = Clock::now();
  size_t events = 0;
  {
    podscope::cupti::ActivityConverter converter(0, [](CUpti_ActivityKind, CUpti_CallbackId) { return std::string(); });
    for (const auto& k : records) converter.add(*static_cast<const CUpti_Activity*>(static_cast<const void*>(&k)));
    converter.finish(converted_space);
    for (const auto& p : converted_space.planes())
      for (const auto& l : p.lines()) events += l.events_size();
  }
  const double convert_s = seconds_since(start);

  std::printf("records: %zu (events out: %zu)\n", n, events);
  std::printf("baseline  XPlaneBuilder only:      %.3f s  %.2f M records/s\n", baseline_s, n / baseline_s / 1e6);
  std::printf("ActivityConverter (demangle, TF stats): %.3f s  %.2f M records/s\n", convert_s, n / convert_s / 1e6);
  std::printf("ratio converter/baseline: %.2f\n", convert_s / baseline_s);
  return events == n ? 0 : 1;
}
