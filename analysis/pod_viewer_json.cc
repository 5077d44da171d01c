// The legacy pod viewer JSON, built as a google.protobuf.Struct and printed by protobuf's JSON printer
// (no hand-written JSON escaping). 64-bit sizes and ids are strings, as in the legacy files.
#include <string>

#include "analysis/renderers.h"
#include "analysis/step_category.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/struct.pb.h"

namespace podscope::analysis {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

Value number(double v) {
  Value value;
  value.set_number_value(v);
  return value;
}
Value text(std::string s) {
  Value value;
  value.set_string_value(std::move(s));
  return value;
}

Struct core_record(const podscope::v1::PodStatsRecord& r) {
  Struct s;
  auto& f = *s.mutable_fields();
  f["hostName"] = text(r.host_name());
  f["chipId"] = number(r.chip_id());
  f["nodeId"] = number(r.node_id());
  f["stepNum"] = number(r.step_num());
  f["totalDurationUs"] = number(r.total_duration_us());
  auto us = [&](StepCategory c) {
    const auto it = r.step_breakdown_us().find(static_cast<int>(c));
    return it == r.step_breakdown_us().end() ? 0.0 : it->second;
  };
  for (const StepCategoryInfo& c : all_step_categories()) f[std::string(c.json_key)] = number(us(c.category));
  for (const GenericCategory& g : generic_gpu_categories()) {
    double total = 0;
    for (StepCategory part : g.parts) total += us(part);
    f[std::string(g.json_key)] = number(total);
  }
  f["bottleneck"] = text(r.bottleneck());
  return s;
}

Value channel(const podscope::v1::ChannelInfo& c) {
  Value v;
  auto& f = *v.mutable_struct_value()->mutable_fields();
  f["channelId"] = text(std::to_string(c.channel_id()));
  f["srcCoreId"] = number(c.src_core_ids_size() > 0 ? c.src_core_ids(0) : 0);
  f["dstCoreId"] = number(c.dst_core_ids_size() > 0 ? c.dst_core_ids(0) : 0);
  f["dataSize"] = text(std::to_string(c.data_size()));
  f["durationUs"] = number(c.duration_us());
  f["sendDelayUs"] = number(c.send_delay_us());
  f["utilization"] = number(c.utilization());
  f["occurrences"] = number(c.occurrences());
  f["replicaId"] = number(0);
  ListValue names;
  for (const auto& n : c.hlo_names()) *names.add_values() = text(n);
  *f["hloNames"].mutable_list_value() = names;
  return v;
}

Value all_reduce_op(const podscope::v1::AllReduceOpInfo& op) {
  Value v;
  auto& f = *v.mutable_struct_value()->mutable_fields();
  f["name"] = text(op.name());
  f["occurrences"] = number(op.occurrences());
  f["durationUs"] = number(op.duration_us());
  f["dataSize"] = text(std::to_string(op.data_size()));
  f["description"] = text(op.description());
  ListValue groups;
  for (const auto& g : op.replica_groups()) {
    Value group;
    ListValue ids;
    for (int64_t id : g.replica_ids()) *ids.add_values() = text(std::to_string(id));
    *(*group.mutable_struct_value()->mutable_fields())["replicaIds"].mutable_list_value() = ids;
    *groups.add_values() = group;
  }
  *f["replicaGroups"].mutable_list_value() = groups;
  return v;
}

}  // namespace

std::string serialize_deterministically(const google::protobuf::Message& message) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&out);
  }
  return bytes;
}

absl::StatusOr<std::string> render_pod_viewer_json(const podscope::v1::PodAnalysis& analysis) {
  const auto& db = analysis.pod_viewer();
  Struct root;
  auto& top = *root.mutable_fields();
  ListValue maps;
  for (const auto& m : db.pod_stats_sequence().pod_stats_map()) {
    Value map;
    auto& f = *map.mutable_struct_value()->mutable_fields();
    f["stepNum"] = number(m.step_num());
    Struct per_core;
    for (const auto& [core, record] : m.pod_stats_per_core()) {
      *(*per_core.mutable_fields())[std::to_string(core)].mutable_struct_value() = core_record(record);
    }
    *f["podStatsPerCore"].mutable_struct_value() = per_core;
    ListValue channels, ops;
    for (const auto& c : m.channel_db()) *channels.add_values() = channel(c);
    for (const auto& op : m.all_reduce_op_db()) *ops.add_values() = all_reduce_op(op);
    *f["channelDb"].mutable_list_value() = channels;
    *f["allReduceOpDb"].mutable_list_value() = ops;
    Struct replicas;
    for (const auto& [core, replica] : m.core_id_to_replica_id_map()) {
      (*replicas.mutable_fields())[std::to_string(core)] = number(replica);
    }
    *f["coreIdToReplicaIdMap"].mutable_struct_value() = replicas;
    *maps.add_values() = map;
  }
  *(*top["podStatsSequence"].mutable_struct_value()->mutable_fields())["podStatsMap"].mutable_list_value() = maps;

  Struct env;
  auto& e = *env.mutable_fields();
  std::map<std::string, int> hosts;
  for (const auto& c : analysis.cores()) ++hosts[c.host_name()];
  e["hostCount"] = number(static_cast<double>(hosts.size()));
  e["tpuType"] = text(db.device_type());
  e["tpuCoreCount"] = number(analysis.cores_size());
  e["deviceType"] = text(db.device_type());
  Struct topology;
  (*topology.mutable_fields())["xDimension"] = text(std::to_string(db.topology().x_dimension()));
  (*topology.mutable_fields())["yDimension"] = text(std::to_string(db.topology().y_dimension()));
  (*topology.mutable_fields())["zDimension"] = text(std::to_string(db.topology().z_dimension()));
  *e["topology"].mutable_struct_value() = topology;
  *top["runEnvironment"].mutable_struct_value() = env;
  top["hloInfoMap"].mutable_struct_value();

  return to_deterministic_json(root, /*add_whitespace=*/true, /*always_print_primitive_fields=*/false);
}

absl::StatusOr<std::string> render_pod_viewer_proto_json(const podscope::v1::PodAnalysis& analysis) {
  return to_deterministic_json(analysis.pod_viewer(), /*add_whitespace=*/true,
                               /*always_print_primitive_fields=*/true);
}

}  // namespace podscope::analysis
