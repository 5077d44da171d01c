// Reading a torch.profiler trace file: `*.pt.trace.json` or its gzip (`*.pt.trace.json.gz`, as
// tensorboard_trace_handler writes with use_gzip), or any Chrome trace with traceEvents under another name, bounded in
// size, converted by trace_converter.h. The file is read (and inflated) a chunk at a time and its events parsed as
// they come, so its text is never held: a conversion holds the events' compact records, then the planes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::kineto {

// The largest trace (uncompressed) a reader accepts: a larger one, or a gzip that inflates past it, is refused
// with an error naming the bound.
inline constexpr uint64_t kMaxTraceBytes = uint64_t{4} << 30;

// How many bytes of a file's start is_chrome_trace_head needs to see: a Kineto trace's fields before its events
// (device properties, process groups) fit in them many times over, gzip or not.
inline constexpr size_t kChromeTraceHeadBytes = size_t{1} << 20;

// Whether a file whose first bytes (up to kChromeTraceHeadBytes of it, plain or gzip) are `head` is a Chrome trace: a
// JSON object whose `traceEvents` array starts within them, as HTA and Perfetto's UI read any file. Pure.
bool is_chrome_trace_head(std::string_view head);

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

// A trace's bytes read front to back: up to `size` of them into `buffer`, how many (0 at the end).
using TraceReadFn = std::function<absl::StatusOr<size_t>(char* buffer, size_t size)>;

// Reads and converts one trace, `size` bytes read through `read` (an object in a bucket), into a serialized XSpace:
// the XSpace read_kineto_trace_file makes, laid out plane by plane as it is built (a few bytes per event, where its
// parsed planes would take a few hundred). `name` names the trace in errors.
absl::StatusOr<std::string> convert_kineto_trace(std::string_view name, uint64_t size, const TraceReadFn& read,
                                                 uint64_t max_bytes = kMaxTraceBytes);
// The same of a local file (a gzip's trailer sizes what its events take, once).
absl::StatusOr<std::string> convert_kineto_trace_file(const std::filesystem::path& path,
                                                      uint64_t max_bytes = kMaxTraceBytes);

}  // namespace podscope::kineto
