// What a capture's sources gather into, and how it becomes the bytes that are answered or written. Most sources add
// planes, lines and warnings to space(). A source that builds planes event by event writes each plane to the wire
// as it is built (written_planes(), see xspace::XPlaneStreamWriter) and the host plane's events through
// host_plane_stream(), so that a capture never holds all of its events as objects: its peak is the serialized
// answer plus one batch of objects.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "proto/xspace/xplane_builder.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::agent {

class CaptureSpace {
 public:
  explicit CaptureSpace(const std::string& host_name);
  CaptureSpace(const CaptureSpace&) = delete;
  CaptureSpace& operator=(const CaptureSpace&) = delete;

  tensorflow::profiler::XSpace& space() { return space_; }
  // The host plane (`/host:CPU`), made on first use.
  tensorflow::profiler::XPlane& host_plane();
  // Serialized XSpace `planes` entries, written while they were built.
  std::string& written_planes() { return written_; }
  // The writer of the host plane: events added to it may go to the wire a batch at a time (flush_events).
  xspace::XPlaneStreamWriter& host_plane_stream();
  // Events a source wrote to the wire (written_planes() or the host plane's stream), for empty_trace.
  void count_written_events(uint64_t events) { written_events_ += events; }

  // Whether any plane holds an event.
  bool has_events() const;
  // The whole XSpace, serialized: the planes written, the host plane, then the rest of the space. Leaves this empty.
  std::string finish();

 private:
  tensorflow::profiler::XSpace space_;
  tensorflow::profiler::XPlane* host_plane_ = nullptr;
  std::optional<xspace::XPlaneStreamWriter> host_stream_;
  std::string written_;
  uint64_t written_events_ = 0;
};

// Appends a warning to serialized XSpace bytes (XSpace `warnings` entries may come in any place).
void append_warning(std::string_view warning, std::string& space_bytes);

}  // namespace podscope::agent
