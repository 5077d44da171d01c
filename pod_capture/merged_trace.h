// The pod's merged Chrome/Perfetto trace (pod.trace.json.gz): every host's events moved onto the
// coordinator's clock (agent time − measured offset), a process per host and plane, a thread per line,
// each event's stats as its args; `_counters_` lines become counter tracks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensorflow/xplane.pb.h"

namespace podscope::pod_capture {

struct HostTrace {
  std::string host_name;
  const tensorflow::profiler::XSpace* space = nullptr;
  int64_t clock_offset_ns = 0;  // host clock − coordinator clock
};

// The JSON text (uncompressed).
std::string merged_trace_json(const std::vector<HostTrace>& hosts);

// gzip-compresses `data` (RFC 1952), as Perfetto and chrome://tracing read .json.gz.
std::string gzip(const std::string& data);

}  // namespace podscope::pod_capture
