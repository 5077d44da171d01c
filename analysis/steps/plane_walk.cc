#include "analysis/steps/plane_walk.h"

namespace podscope::analysis {

void walk_plane(const xspace::XPlaneReader& plane, std::span<PlaneEventReader* const> readers) {
  std::vector<PlaneEventReader*> line_readers;
  line_readers.reserve(readers.size());
  for (const tensorflow::profiler::XLine& line : plane.proto().lines()) {
    line_readers.clear();
    for (PlaneEventReader* reader : readers)
      if (reader->reads_line(line)) line_readers.push_back(reader);
    if (line_readers.empty()) continue;
    for (PlaneEventReader* reader : line_readers) reader->begin_line(line);
    for (const tensorflow::profiler::XEvent& event : line.events()) {
      const xspace::XEventView view(plane, line, event);
      for (PlaneEventReader* reader : line_readers) reader->add_event(view);
    }
    for (PlaneEventReader* reader : line_readers) reader->end_line(line);
  }
}

void read_plane_alone(PlaneConsumer& consumer, size_t file_index, const tensorflow::profiler::XPlane& plane) {
  const xspace::XPlaneReader reader(plane);
  std::vector<PlaneEventReader*> readers;
  consumer.begin_plane(file_index, reader, readers);
  walk_plane(reader, readers);
  consumer.end_plane(file_index);
}

}  // namespace podscope::analysis
