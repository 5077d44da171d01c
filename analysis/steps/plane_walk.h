// One walk over a plane's events for every tool that reads them. The tools of the analysis read the same planes
// (a custom core's op lines feed the pod viewer, the step model, op stats and kernel stats); walking them once, each
// event handed to every reader while it is in cache, costs a fraction of one walk per tool. A reader of a plane is
// a PlaneEventReader; a tool that reads many planes is a PlaneConsumer, which makes its readers of each plane.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "proto/xspace/xplane_reader.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// What one tool reads of one plane's events.
class PlaneEventReader {
 public:
  virtual ~PlaneEventReader() = default;
  // Whether it reads this line's events (asked once per line, before its events).
  virtual bool reads_line(const tensorflow::profiler::XLine& line) const = 0;
  virtual void begin_line(const tensorflow::profiler::XLine&) {}
  virtual void add_event(const xspace::XEventView& event) = 0;
  virtual void end_line(const tensorflow::profiler::XLine&) {}
};

// Hands every event of the plane, line by line in the plane's order, to each reader that reads its line, in the
// readers' order.
void walk_plane(const xspace::XPlaneReader& plane, std::span<PlaneEventReader* const> readers);

// A tool that reads planes in walks shared with other tools: begin_plane adds its readers of the plane (none when
// it has nothing to read there) to `readers`, and end_plane takes what they read once the walk is over. The plane
// and `plane` live until end_plane returns.
class PlaneConsumer {
 public:
  virtual ~PlaneConsumer() = default;
  virtual void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                           std::vector<PlaneEventReader*>& readers) = 0;
  virtual void end_plane(size_t file_index) = 0;
};

// The plane read by `consumer` alone: begin, a walk of its own, end.
void read_plane_alone(PlaneConsumer& consumer, size_t file_index, const tensorflow::profiler::XPlane& plane);

}  // namespace podscope::analysis
