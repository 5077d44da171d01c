// Reading a torch.profiler trace file: `*.pt.trace.json` or its gzip (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler writes with use_gzip), bounded in size, converted by trace_converter.h. The JSON is
// freed before the planes are built, so the file's text and its XSpace are never both held.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::kineto {

// The largest trace (uncompressed) a reader accepts: a larger one, or a gzip that inflates past it, is refused
// with an error naming the bound.
inline constexpr uint64_t kMaxTraceBytes = uint64_t{4} << 30;

// Whether a file name is a torch.profiler trace's.
bool is_kineto_trace_file_name(std::string_view file_name);

// A run directory file's name without `.xplane.pb` or `.pt.trace.json[.gz]`: the host name of its planes when
// neither its host plane nor its XSpace names one (analysis/step_spans.h, FileSteps::host_name).
std::string run_file_stem(std::string_view file_name);

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

// The planes of a run directory's file, whichever kind it is: a torch.profiler trace, converted (every line is
// handed over; its header holds only the conversion's warnings), or an XSpace, streamed plane by plane as
// read_xspace_planes does.
absl::Status read_run_file_planes(const std::filesystem::path& path,
                                  const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                                  xspace::XSpaceHeader* header = nullptr,
                                  const xspace::XLineFilter& keep_line = nullptr);

}  // namespace podscope::kineto
