// The legacy pod viewer JSON, written with the analysis' JSON writer in the form protobuf's printer gave it when
// it was built as a google.protobuf.Struct: every object's keys in byte order, numbers as doubles, 64-bit sizes and
// ids as strings (as in the legacy files).
#include <algorithm>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "analysis/rendering/json_writer.h"
#include "analysis/rendering/renderers.h"
#include "analysis/pod/step_category.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace podscope::analysis {
namespace {

// One key of a per-core record, and where its value comes from.
struct CoreRecordKey {
  enum Source { kHostName, kChipId, kNodeId, kStepNum, kTotalDuration, kCategory, kGeneric, kBottleneck };
  std::string_view key;
  Source source;
  size_t index = 0;  // the category's id, or the generic category's place in its table
};

// The record's keys in byte order, computed once.
const std::vector<CoreRecordKey>& core_record_keys() {
  static const std::vector<CoreRecordKey> keys = [] {
    std::map<std::string_view, CoreRecordKey> sorted;
    auto add = [&](std::string_view key, CoreRecordKey::Source source, size_t index = 0) {
      sorted[key] = {key, source, index};
    };
    add("hostName", CoreRecordKey::kHostName);
    add("chipId", CoreRecordKey::kChipId);
    add("nodeId", CoreRecordKey::kNodeId);
    add("stepNum", CoreRecordKey::kStepNum);
    add("totalDurationUs", CoreRecordKey::kTotalDuration);
    for (const StepCategoryInfo& c : all_step_categories())
      add(c.json_key, CoreRecordKey::kCategory, static_cast<size_t>(c.category));
    const auto generic = generic_gpu_categories();
    for (size_t i = 0; i < generic.size(); ++i) add(generic[i].json_key, CoreRecordKey::kGeneric, i);
    add("bottleneck", CoreRecordKey::kBottleneck);
    std::vector<CoreRecordKey> out;
    for (const auto& [key, entry] : sorted) out.push_back(entry);
    return out;
  }();
  return keys;
}

void core_record(const podscope::v1::PodStatsRecord& r, JsonWriter& w) {
  auto us = [&](StepCategory c) {
    const auto it = r.step_breakdown_us().find(static_cast<int>(c));
    return it == r.step_breakdown_us().end() ? 0.0 : it->second;
  };
  w.begin_object();
  for (const CoreRecordKey& k : core_record_keys()) {
    w.key(k.key);
    switch (k.source) {
      case CoreRecordKey::kHostName: w.string(r.host_name()); break;
      case CoreRecordKey::kChipId: w.number(static_cast<double>(r.chip_id())); break;
      case CoreRecordKey::kNodeId: w.number(static_cast<double>(r.node_id())); break;
      case CoreRecordKey::kStepNum: w.number(static_cast<double>(r.step_num())); break;
      case CoreRecordKey::kTotalDuration: w.number(r.total_duration_us()); break;
      case CoreRecordKey::kCategory: w.number(us(static_cast<StepCategory>(k.index))); break;
      case CoreRecordKey::kGeneric: {
        double total = 0;
        for (StepCategory part : generic_gpu_categories()[k.index].parts) total += us(part);
        w.number(total);
        break;
      }
      case CoreRecordKey::kBottleneck: w.string(r.bottleneck()); break;
    }
  }
  w.end_object();
}

void channel(const podscope::v1::ChannelInfo& c, JsonWriter& w) {
  w.begin_object();
  w.key("channelId");
  w.string(std::to_string(c.channel_id()));
  w.key("dataSize");
  w.string(std::to_string(c.data_size()));
  w.key("dstCoreId");
  w.number(static_cast<double>(c.dst_core_ids_size() > 0 ? c.dst_core_ids(0) : 0));
  w.key("durationUs");
  w.number(c.duration_us());
  w.key("hloNames");
  w.begin_array();
  for (const auto& n : c.hlo_names()) w.string(n);
  w.end_array();
  w.key("occurrences");
  w.number(static_cast<double>(c.occurrences()));
  w.key("replicaId");
  w.number(0.0);
  w.key("sendDelayUs");
  w.number(c.send_delay_us());
  w.key("srcCoreId");
  w.number(static_cast<double>(c.src_core_ids_size() > 0 ? c.src_core_ids(0) : 0));
  w.key("utilization");
  w.number(static_cast<double>(c.utilization()));
  w.end_object();
}

void all_reduce_op(const podscope::v1::AllReduceOpInfo& op, JsonWriter& w) {
  w.begin_object();
  w.key("dataSize");
  w.string(std::to_string(op.data_size()));
  w.key("description");
  w.string(op.description());
  w.key("durationUs");
  w.number(static_cast<double>(op.duration_us()));
  w.key("name");
  w.string(op.name());
  w.key("occurrences");
  w.number(static_cast<double>(op.occurrences()));
  w.key("replicaGroups");
  w.begin_array();
  for (const auto& g : op.replica_groups()) {
    w.begin_object();
    w.key("replicaIds");
    w.begin_array();
    for (int64_t id : g.replica_ids()) w.string(std::to_string(id));
    w.end_array();
    w.end_object();
  }
  w.end_array();
  w.end_object();
}

// A map keyed by core id as an object: its keys are the ids as strings, in byte order ("10" before "2").
template <typename Map, typename WriteValue>
void by_core_id(const Map& map, JsonWriter& w, WriteValue&& write_value) {
  std::vector<std::pair<std::string, const typename Map::mapped_type*>> entries;
  entries.reserve(map.size());
  for (const auto& [core, value] : map) entries.emplace_back(std::to_string(core), &value);
  std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  w.begin_object();
  for (const auto& [key, value] : entries) {
    w.key(key);
    write_value(*value);
  }
  w.end_object();
}

}  // namespace

absl::StatusOr<std::string> render_pod_viewer_json(const podscope::v1::PodAnalysis& analysis) {
  const auto& db = analysis.pod_viewer();
  JsonWriter w(/*indented=*/true);
  w.begin_object();
  w.key("hloInfoMap");
  w.begin_object();
  w.end_object();
  w.key("podStatsSequence");
  w.begin_object();
  w.key("podStatsMap");
  w.begin_array();
  for (const auto& m : db.pod_stats_sequence().pod_stats_map()) {
    w.begin_object();
    w.key("allReduceOpDb");
    w.begin_array();
    for (const auto& op : m.all_reduce_op_db()) all_reduce_op(op, w);
    w.end_array();
    w.key("channelDb");
    w.begin_array();
    for (const auto& c : m.channel_db()) channel(c, w);
    w.end_array();
    w.key("coreIdToReplicaIdMap");
    by_core_id(m.core_id_to_replica_id_map(), w, [&](uint32_t replica) { w.number(static_cast<double>(replica)); });
    w.key("podStatsPerCore");
    by_core_id(m.pod_stats_per_core(), w, [&](const podscope::v1::PodStatsRecord& r) { core_record(r, w); });
    w.key("stepNum");
    w.number(static_cast<double>(m.step_num()));
    w.end_object();
  }
  w.end_array();
  w.end_object();

  w.key("runEnvironment");
  w.begin_object();
  std::map<std::string, int> hosts;
  for (const auto& c : analysis.cores()) ++hosts[c.host_name()];
  w.key("deviceType");
  w.string(db.device_type());
  w.key("hostCount");
  w.number(static_cast<double>(hosts.size()));
  w.key("topology");
  w.begin_object();
  w.key("xDimension");
  w.string(std::to_string(db.topology().x_dimension()));
  w.key("yDimension");
  w.string(std::to_string(db.topology().y_dimension()));
  w.key("zDimension");
  w.string(std::to_string(db.topology().z_dimension()));
  w.end_object();
  w.key("tpuCoreCount");
  w.number(static_cast<double>(analysis.cores_size()));
  w.key("tpuType");
  w.string(db.device_type());
  w.end_object();
  w.end_object();
  return std::move(w).take();
}

absl::StatusOr<std::string> render_pod_viewer_proto_json(const podscope::v1::PodAnalysis& analysis) {
  return message_to_json(analysis.pod_viewer(), /*indented=*/true);
}

}  // namespace podscope::analysis
