#include "run_directory/run_file_reader.h"

#include "kineto/trace_file.h"

namespace podscope::run_directory {

absl::Status RunFileReader::read_planes(
    const RunDirectory& run, const RunFile& file,
    const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane, xspace::XSpaceHeader* header,
    const xspace::XLineFilter& keep_line) {
  const std::filesystem::path path = run.location_of(file.name);
  if (!is_kineto_trace_file_name(file.name)) return xspace::read_xspace_planes(path, on_plane, header, keep_line);
  absl::StatusOr<tensorflow::profiler::XSpace> fresh;
  const absl::StatusOr<tensorflow::profiler::XSpace>* space = nullptr;
  if (const auto kept = converted_.find(path.string()); kept != converted_.end()) {
    space = &kept->second;
  } else {
    fresh = kineto::read_kineto_trace_file(path);
    const uint64_t bytes = fresh.ok() ? fresh->ByteSizeLong() : 0;
    if (bytes <= kept_bytes_left_) {
      kept_bytes_left_ -= bytes;
      space = &converted_.emplace(path.string(), std::move(fresh)).first->second;
    } else {
      space = &fresh;
    }
  }
  if (!space->ok()) return space->status();
  if (header) header->warnings.assign((*space)->warnings().begin(), (*space)->warnings().end());
  for (const tensorflow::profiler::XPlane& plane : (*space)->planes()) {
    if (absl::Status s = on_plane(plane); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace podscope::run_directory
