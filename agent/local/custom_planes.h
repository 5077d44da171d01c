// Turns the events local clients sent during a capture window into one plane per annotated core:
// `/device:CUSTOM:<core>` with plane id = core id, a `Steps` line (step events, stat step_num) and one
// line per client thread ("Thread <tid>") holding its op events, named as XLA names them (infeed,
// outfeed, all-reduce, send, recv-done; compute and free-form events keep their own names), and an
// `Input Pipeline` line holding the input stages of every thread, named by the stage, with their category,
// id and parent id. Every event inside a step of its core carries that step's step_num, plus its own
// stats. Allocation records go to the host plane, one line per process, as TensorFlow's allocator events
// (MemoryAllocation / MemoryDeallocation with each allocator's running total of live bytes), so that the
// memory profile reads them as TensorFlow's. Pure: no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/local/client_registry.h"
#include "daemon/clock.h"
#include "proto/xspace/xplane_builder.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::agent {

struct CustomPlaneOptions {
  int64_t window_start_ns = 0;  // agent clock; events wholly outside [start, end] are left out
  int64_t window_end_ns = 0;
  // When set, each `/device:CUSTOM:<core>` plane is serialized here (XSpace `planes` entries) while it is built, a
  // batch of events at a time, instead of being left in the space: a build then holds the objects of one batch,
  // not of every event.
  std::string* serialized_planes = nullptr;
  // When set (with serialized_planes), the writer of the space's host plane: the step markers and allocation
  // records added to it go to the wire a batch at a time too. The caller adds the rest and finishes it.
  xspace::XPlaneStreamWriter* host_plane_stream = nullptr;
};

// `clock` shifts the clients' system-clock times onto the agent clock (its --clock_offset_ns). The planes are built
// one core at a time from the clients' held records: a build holds a 16-byte sort key per event of the core it
// writes, and decodes each event as it is written.
void add_custom_planes(const std::vector<LocalClientCapture>& captures, const Clock& clock,
                       const CustomPlaneOptions& options, tensorflow::profiler::XSpace& space);

}  // namespace podscope::agent
