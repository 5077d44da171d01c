#include "agent/capture/capture_space.h"

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::agent {

CaptureSpace::CaptureSpace(const std::string& host_name) { space_.add_hostnames(host_name); }

tensorflow::profiler::XPlane& CaptureSpace::host_plane() {
  if (!host_plane_) host_plane_ = xspace::find_or_add_plane(space_, xspace::kHostPlaneName);
  return *host_plane_;
}

xspace::XPlaneStreamWriter& CaptureSpace::host_plane_stream() {
  if (!host_stream_) host_stream_.emplace(host_plane());
  return *host_stream_;
}

bool CaptureSpace::has_events() const { return written_events_ > 0 || xspace::has_events(space_); }

std::string CaptureSpace::finish() {
  if (host_stream_) {
    host_stream_->finish(written_);
    host_stream_.reset();
    for (int i = 0; i < space_.planes_size(); ++i) {
      if (&space_.planes(i) == host_plane_) {
        space_.mutable_planes()->DeleteSubrange(i, 1);
        break;
      }
    }
  }
  host_plane_ = nullptr;
  space_.AppendToString(&written_);
  space_.Clear();
  written_events_ = 0;
  std::string bytes = std::move(written_);
  written_.clear();
  return bytes;
}

void append_warning(std::string_view warning, std::string& space_bytes) {
  tensorflow::profiler::XSpace with_warning;
  with_warning.add_warnings(std::string(warning));
  with_warning.AppendToString(&space_bytes);
}

}  // namespace podscope::agent
