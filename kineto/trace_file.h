// Reading a torch.profiler trace file: `*.pt.trace.json` or its gzip (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler writes with use_gzip), bounded in size, converted by trace_converter.h. The JSON is
// freed before the planes are built, so the file's text and its XSpace are never both held.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::kineto {

// The largest trace (uncompressed) a reader accepts: a larger one, or a gzip that inflates past it, is refused
// with an error naming the bound.
inline constexpr uint64_t kMaxTraceBytes = uint64_t{4} << 30;

// What a caller knows of the traced process when its trace does not say: traces of Kineto's on-demand (daemon)
// mode carry no `distributedInfo`, and the agent reads the rank from the process's environment (torchrun's RANK).
struct ProcessRank {
  int64_t rank = -1;  // -1: unknown
  int64_t world_size = -1;
};

// Reads and converts one trace file; errors name the file. `fallback` is the rank when the trace has none.
absl::StatusOr<tensorflow::profiler::XSpace> read_kineto_trace_file(const std::filesystem::path& path,
                                                                    uint64_t max_bytes = kMaxTraceBytes,
                                                                    const ProcessRank& fallback = {});

}  // namespace podscope::kineto
