// Reading a torch.profiler trace file: `*.pt.trace.json` or its gzip (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler writes with use_gzip), bounded in size, converted by trace_converter.h. The JSON is
// freed before the planes are built, so the file's text and its XSpace are never both held.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
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
// neither its host plane nor its XSpace names one (analysis/steps/step_spans.h, FileSteps::host_name).
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

// How many bytes of converted traces (serialized XSpace size) a RunFileReader keeps for later passes in all.
inline constexpr uint64_t kKeptConversionBytes = uint64_t{256} << 20;

// The planes of a run directory's files, whichever kind each is, for every pass over the run: the analysis and the
// pod-trace writer's two passes read through one reader. An XSpace is streamed plane by plane at each pass, as
// read_xspace_planes does, so no file is too large. A torch.profiler trace is decompressed, parsed and converted
// once, at its first pass, and its planes kept for the next passes while the kept conversions stay within
// `kept_bytes` (a conversion beyond it is done again at each pass); its failure is kept too.
class RunFileReader {
 public:
  explicit RunFileReader(uint64_t kept_bytes = kKeptConversionBytes) : kept_bytes_left_(kept_bytes) {}

  // Hands `on_plane` each plane of `path` (of a converted trace every line; its header holds only the conversion's
  // warnings).
  absl::Status read_planes(const std::filesystem::path& path,
                           const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                           xspace::XSpaceHeader* header = nullptr, const xspace::XLineFilter& keep_line = nullptr);

 private:
  std::map<std::filesystem::path, absl::StatusOr<tensorflow::profiler::XSpace>> converted_;
  uint64_t kept_bytes_left_;
};

}  // namespace podscope::kineto
