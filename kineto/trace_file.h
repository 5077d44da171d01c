// Reading a torch.profiler trace file: `*.pt.trace.json` or its gzip (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler writes with use_gzip), or any Chrome trace with traceEvents under another name, bounded in
// size, converted by trace_converter.h. The file is read (and inflated) a chunk at a time and its events parsed as
// they come, so its text is never held: a conversion holds the events' compact records, then the planes.
#pragma once

#include <cstddef>
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

// Whether a file name is a torch.profiler trace's (`*.pt.trace.json[.gz]`): such a file is read as a trace whatever
// it holds (a broken one is a bad file of the run, named with its error).
bool is_kineto_trace_file_name(std::string_view file_name);

// Whether a file name is a JSON file's (`*.json`, `*.json.gz`): a Chrome trace, if its content says so.
bool is_json_file_name(std::string_view file_name);

// How many bytes of a file's start is_chrome_trace_head needs to see: a Kineto trace's fields before its events
// (device properties, process groups) fit in them many times over, gzip or not.
inline constexpr size_t kChromeTraceHeadBytes = size_t{1} << 20;

// Whether a file whose first bytes (up to kChromeTraceHeadBytes of it, plain or gzip) are `head` is a Chrome trace: a
// JSON object whose `traceEvents` array starts within them, as HTA and Perfetto's UI read any file. Pure.
bool is_chrome_trace_head(std::string_view head);

// is_chrome_trace_head on the start of a regular file (false for anything else, or a file that cannot be read).
bool is_chrome_trace_file(const std::filesystem::path& path);

// A run file's name without `.xplane.pb`, `.pt.trace.json[.gz]` or `.json[.gz]`: the host name of its planes when
// neither its host plane nor its XSpace names one (analysis/steps/step_spans.h, FileSteps::host_name).
std::string run_file_stem(std::string_view file_name);

// What a caller knows of the traced process when its trace does not say: traces of Kineto's on-demand (daemon)
// mode carry no `distributedInfo`, and the agent reads the rank from the process's environment (torchrun's RANK).
struct ProcessRank {
  int64_t rank = -1;  // -1: unknown
  int64_t world_size = -1;
};

// Reads and converts one trace file; errors name the file. `fallback` is the rank when the trace has none. What it
// holds at its peak is the events' records, then the XSpace.
absl::StatusOr<tensorflow::profiler::XSpace> read_kineto_trace_file(const std::filesystem::path& path,
                                                                    uint64_t max_bytes = kMaxTraceBytes,
                                                                    const ProcessRank& fallback = {});

// How many bytes of converted traces (serialized XSpace size) a RunFileReader keeps for later passes in all.
inline constexpr uint64_t kKeptConversionBytes = uint64_t{256} << 20;

// The planes of a run's files, whichever kind each is, for every pass over the run: the analysis and the pod-trace
// writer's two passes read through one reader. An XSpace (`*.xplane.pb`) is streamed plane by plane at each pass, as
// read_xspace_planes does, so no file is too large; any other file is a trace. A trace is decompressed, parsed and
// converted once, at its first pass, into a serialized XSpace (a few bytes per event: the planes are never all held
// as objects), which is kept for the next passes while the kept conversions stay within `kept_bytes` (a conversion
// beyond it is done again at each pass) and streamed plane by plane at each; its failure is kept too.
class RunFileReader {
 public:
  explicit RunFileReader(uint64_t kept_bytes = kKeptConversionBytes) : kept_bytes_left_(kept_bytes) {}

  // Hands `on_plane` each plane of `path` (of a converted trace every line; its header holds only the conversion's
  // warnings).
  absl::Status read_planes(const std::filesystem::path& path,
                           const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                           xspace::XSpaceHeader* header = nullptr, const xspace::XLineFilter& keep_line = nullptr);

 private:
  std::map<std::filesystem::path, absl::StatusOr<std::string>> converted_;  // serialized XSpace
  uint64_t kept_bytes_left_;
};

}  // namespace podscope::kineto
