// Reading a run's profile files plane by plane, whichever kind each is, for every pass over the run: the analysis and
// the pod-trace writer's two passes read through one reader.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "run_directory/run_directory.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::run_directory {

// How many bytes of converted traces (serialized XSpace size) a RunFileReader keeps for later passes in all.
inline constexpr uint64_t kKeptConversionBytes = uint64_t{256} << 20;

// An XSpace (`*.xplane.pb`) is streamed plane by plane at each pass, as read_xspace_planes does, so no file is too
// large. A host file that its agent wrote into a bucket itself carries no clock measurement (the client measured it,
// and never held the file): its planes are given the offset and round trip capture.json records for the file, as the
// capture stamps them on the files it writes itself, so every reader merges clocks alike. Any other file is a trace:
// read as it streams, inflated and converted once, at its first pass (kineto/trace_file.h), into a serialized XSpace
// (a few bytes per event: the planes are never all held as objects), which is kept for the next passes while the
// kept conversions stay within `kept_bytes` (a conversion beyond it is done again at each pass) and streamed plane by
// plane at each; its failure is kept too. Several threads may read through one reader at once, each its own files.
class RunFileReader {
 public:
  explicit RunFileReader(uint64_t kept_bytes = kKeptConversionBytes) : kept_bytes_left_(kept_bytes) {}

  // Hands `on_plane` each plane of `file` (of a converted trace every line; its header holds only the conversion's
  // warnings). Errors name the file.
  absl::Status read_planes(const RunFile& file,
                           const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
                           xspace::XSpaceHeader* header = nullptr, const xspace::XLineFilter& keep_line = nullptr);

  // The clock offset capture.json records for `file` (what read_planes stamps on its planes when they state none);
  // none when the run has no record of it.
  std::optional<int64_t> recorded_clock_offset_ns(const RunFile& file);

 private:
  // The clock measurement capture.json records for each host file (by file name), read at the first pass.
  struct FileClock {
    int64_t offset_ns = 0;
    int64_t rtt_ns = 0;
  };
  const std::map<std::string, FileClock>& clocks_of(const RunDirectory& run);

  std::map<std::string, absl::StatusOr<std::string>> converted_;    // serialized XSpaces, by location
  std::map<std::string, std::map<std::string, FileClock>> clocks_;  // by run location
  uint64_t kept_bytes_left_;
  std::mutex mutex_;  // guards the maps and the bytes left
};

}  // namespace podscope::run_directory
