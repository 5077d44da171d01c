// The tests' own reading of a Perfetto trace file, written from the field numbers of Perfetto's public
// protos (not from pod_capture's writer): packets, track descriptors, track events with their interned
// names resolved per packet sequence, flows and counter values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace podscope::trace_writers::testing {

struct DecodedTrack {
  uint64_t uuid = 0;
  uint64_t parent_uuid = 0;
  std::string name;  // thread, process or counter track name
  std::optional<int64_t> pid;
  bool is_process = false;
  bool is_thread = false;
  bool is_counter = false;
};

struct DecodedEvent {
  uint64_t timestamp = 0;
  uint32_t sequence_id = 0;
  uint64_t type = 0;  // 1 begin, 2 end, 4 counter
  uint64_t track_uuid = 0;
  std::string name;      // resolved from name_iid (begin only)
  std::string category;  // resolved from category_iids
  std::optional<double> counter_value;
  std::vector<uint64_t> flow_ids, terminating_flow_ids;
  std::map<std::string, std::string> annotations;  // name -> value as text
  bool interning_resolved = true;                  // every iid it used was defined earlier on its sequence
};

struct DecodedTrace {
  std::map<uint64_t, DecodedTrack> tracks;
  std::vector<DecodedEvent> events;  // file order
  // Sequences whose first packet did not set SEQ_INCREMENTAL_STATE_CLEARED.
  std::vector<uint32_t> sequences_without_cleared_state;
  std::string error;  // empty when the file decoded
};

DecodedTrace read_perfetto_trace(const std::filesystem::path& path);

}  // namespace podscope::trace_writers::testing
