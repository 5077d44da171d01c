#include "analysis/pod/pod_analyzer.h"

#include <algorithm>
#include <charconv>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "analysis/pod/all_reduce_analysis.h"
#include "analysis/pod/channel_analysis.h"
#include "analysis/pod/step_category.h"
#include "analysis/steps/step_sampling.h"

namespace podscope::analysis {
namespace {

using podscope::v1::CoreStep;
using podscope::v1::CoreStepDatabase;
using podscope::v1::PodAnalysis;

// Global core ids of TF/JAX device planes: file index × 1000 + device ordinal, so one file's GPU:4 is
// core 4 and the second file's is core 1004. Annotated planes keep the core id they declared (plane id); a
// device plane that states its rank (a PyTorch rank's GPU) is core `rank`.
constexpr uint32_t kCoreIdsPerFile = 1000;

std::optional<uint32_t> device_ordinal(std::string_view plane_name) {
  const size_t colon = plane_name.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  uint32_t ordinal = 0;
  const char* begin = plane_name.data() + colon + 1;
  const char* end = plane_name.data() + plane_name.size();
  const auto [ptr, ec] = std::from_chars(begin, end, ordinal);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return ordinal;
}

std::string_view core_kind_name(podscope::v1::CoreKind kind) {
  switch (kind) {
    case podscope::v1::CORE_KIND_CUSTOM: return "CUSTOM";
    case podscope::v1::CORE_KIND_TPU: return "TPU";
    case podscope::v1::CORE_KIND_GPU: return "GPU";
    case podscope::v1::CORE_KIND_HOST: return "CPU";
    default: return "";
  }
}

// Our op kinds onto the step categories; collective time is split into sync and compute afterwards.
CategoryDurations categorize(const CoreStep& step, int64_t sync_ns) {
  CategoryDurations d{};
  auto op = [&](OpKind k) {
    const int i = static_cast<int>(k);
    return i < step.op_ns_size() ? step.op_ns(i) : 0;
  };
  const int64_t collective = op(OpKind::kCollective);
  const int64_t sync = std::min(collective, sync_ns);
  at(d, StepCategory::kAllReduceSync) = sync;
  at(d, StepCategory::kAllReduceCompute) = collective - sync;
  at(d, StepCategory::kHostInfeed) = op(OpKind::kInfeed) + step.input_wait_ns();
  at(d, StepCategory::kHostOutfeed) = op(OpKind::kOutfeed);
  at(d, StepCategory::kSend) = op(OpKind::kSend);
  at(d, StepCategory::kRecvDone) = op(OpKind::kRecvDone);
  at(d, StepCategory::kHighFlopsCompute) = op(OpKind::kHighFlopsCompute);
  at(d, StepCategory::kLowFlopsCompute) = op(OpKind::kLowFlopsCompute);
  at(d, StepCategory::kHostToDevice) = op(OpKind::kHostToDevice);
  at(d, StepCategory::kDeviceToHost) = op(OpKind::kDeviceToHost);
  at(d, StepCategory::kDeviceToDevice) = op(OpKind::kDeviceToDevice);
  at(d, StepCategory::kKernelLaunch) = step.kernel_launch_ns();
  at(d, StepCategory::kHostCompute) = step.host_compute_ns();
  at(d, StepCategory::kCompilation) = step.compilation_ns();
  at(d, StepCategory::kIdle) =
      step.idle_ns() - step.kernel_launch_ns() - step.host_compute_ns() - step.compilation_ns() - step.input_wait_ns();
  return d;
}

int64_t sum(const CategoryDurations& d) {
  int64_t total = 0;
  for (int id = 1; id <= kMaxStepCategoryId; ++id) total += d[id];
  return total;
}

// Orders channel summaries (and steps) by step number.
struct ByStep {
  bool operator()(const ChannelSummary& c, int64_t step) const { return c.step_num < step; }
  bool operator()(int64_t step, const ChannelSummary& c) const { return step < c.step_num; }
};

struct CoreIdentity {
  uint32_t core_id = 0;
  std::string host_name;
  int32_t chip_id = 0;
  int32_t node_id = 0;
  const PodCore* core = nullptr;
};

// Builds the PodAnalysis from the pod's steps, one pass per concern, in order.
class PodAssembly {
 public:
  PodAssembly(const PodSteps& pod, const PodAnalyzerOptions& options) : pod_(pod), options_(options) {}

  PodAnalysis build() && {
    counts().set_files(static_cast<uint32_t>(pod_.hosts.size()));
    counts().set_device_planes(pod_.device_planes);
    out_.set_peak_link_bandwidth_bytes_per_s(options_.peak_link_bandwidth_bytes_per_s);
    identify_cores();
    match_across_cores();
    fill_pod_stats();
    describe_topology();
    summarize_cores();
    for (auto& s : find_stragglers(step_times_, host_names_, options_.stragglers)) {
      *out_.add_stragglers() = std::move(s);
    }
    rank_top_ops();
    add_diagnostics();
    return std::move(out_);
  }

 private:
  podscope::v1::AnalysisCounts& counts() { return *out_.mutable_counts(); }
  podscope::v1::PodViewerDatabase& db() { return *out_.mutable_pod_viewer(); }

  // Who each core is: a device plane, or the host of a program without devices (its /host:CPU, core file index ×
  // 1000 as a device ordinal 0 would be). Planes without steps are skipped (they still count toward top ops), and so
  // is a second plane claiming a core id already taken. Its steps are those the pod keeps.
  void identify_cores() {
    for (const PodCore& core : pod_.cores) {
      const CoreStepDatabase& db = *core.core;
      counts().set_events(counts().events() + db.event_count());
      if (db.steps_found() == 0) {
        counts().set_planes_without_steps(counts().planes_without_steps() + 1);
        continue;
      }
      CoreIdentity id;
      id.core = &core;
      const PodCoreId ids = pod_core_id(core);
      id.core_id = ids.core_id;
      id.chip_id = ids.chip_id;
      id.node_id = static_cast<int32_t>(core.host_index);
      id.host_name = core.host_name;
      if (identities_.contains(id.core_id)) {
        warnings_.push_back(absl::StrCat("core id ", id.core_id, " of plane ", db.plane_name(), " in file ",
                                         core.host_index, " is already taken by another plane; plane skipped"));
        continue;
      }
      counts().set_partial_steps_trimmed(counts().partial_steps_trimmed() + db.steps_cut_by_window());
      host_names_[id.core_id] = id.host_name;
      identities_[id.core_id] = std::move(id);
      device_kinds_.insert(std::string(core_kind_name(db.kind())));
    }
  }

  const PodCore& core_of(uint32_t core_id) const { return *identities_.at(core_id).core; }

  // All-reduce sync vs compute and channels: the events of the kept steps, matched across cores.
  void match_across_cores() {
    std::vector<CoreCollective> collectives;
    std::vector<MergedEndpoint> endpoints;
    for (const auto& [core_id, identity] : identities_) {
      const PodCore& core = core_of(core_id);
      absl::flat_hash_set<int64_t> steps;
      for (const CoreStep* s : core.steps) steps.insert(s->step_num());
      for (const podscope::v1::Collective& c : core.core->collectives()) {
        if (steps.contains(c.step_num())) collectives.push_back({core_id, &c});
      }
      // Channel endpoints move onto the coordinator's clock: host time − (host − coordinator) offset.
      const int64_t offset = core.host->clock_offset_ns();
      for (const podscope::v1::ChannelEndpoint& e : core.core->channel_endpoints()) {
        if (!steps.contains(e.step_num())) continue;
        endpoints.push_back(
            {core_id, e.is_send(), e.step_num(), e.channel_id(), &e, e.start_ns() - offset, e.end_ns() - offset});
      }
    }
    all_reduce_ = analyze_all_reduces(collectives);
    channels_ = analyze_channels(std::move(endpoints), options_.peak_link_bandwidth_bytes_per_s);
    counts().set_unpaired_sends(channels_.unpaired_sends);
    counts().set_unpaired_recv_dones(channels_.unpaired_recv_dones);
    counts().set_negative_channel_durations(channels_.negative_durations);
    const size_t listed = channels_.warnings.size();
    for (auto& w : channels_.warnings) warnings_.push_back(std::move(w));
    if (channels_.negative_durations > listed) {
      warnings_.push_back(absl::StrCat("clock merge: ", channels_.negative_durations,
                                       " channel transfers in all have a negative duration"));
    }
  }

  // One PodStatsMap per step number, one record per core in it.
  void fill_pod_stats() {
    std::map<int64_t, std::map<uint32_t, CategoryDurations>> records;
    for (const auto& [core_id, identity] : identities_) {
      for (const CoreStep* s : identity.core->steps) {
        const auto sync = all_reduce_.sync_ns.find({s->step_num(), core_id});
        const CategoryDurations d = categorize(*s, sync == all_reduce_.sync_ns.end() ? 0 : sync->second);
        CategoryDurations& record = records[s->step_num()][core_id];
        for (int id = 1; id <= kMaxStepCategoryId; ++id) record[id] += d[id];
      }
    }
    // Replica ids: the analysed cores numbered in core id order.
    std::map<uint32_t, uint32_t> replica_of;
    for (const auto& [core_id, identity] : identities_) {
      replica_of.emplace(core_id, static_cast<uint32_t>(replica_of.size()));
    }
    for (const StepCategoryInfo& c : all_step_categories()) {
      auto* e = db().add_step_breakdown_events();
      e->set_id(static_cast<int>(c.category));
      e->set_name(std::string(c.display_name));
    }
    db().set_device_type(absl::StrJoin(device_kinds_, ","));

    const std::vector<bool> shown = shown_steps(records);
    int64_t pod_total_ns = 0, pod_sync_ns = 0;
    size_t step_index = 0;
    for (const auto& [step_num, cores] : records) {
      podscope::v1::PodStatsMap* map =
          shown[step_index++] ? db().mutable_pod_stats_sequence()->add_pod_stats_map() : nullptr;
      if (map != nullptr) map->set_step_num(static_cast<uint32_t>(step_num));
      for (const auto& [core_id, d] : cores) {
        const int64_t total = sum(d);
        if (map != nullptr) add_record(*map, static_cast<uint32_t>(step_num), core_id, d, replica_of[core_id]);
        CoreStepTimes& times = step_times_[step_num][core_id];
        times.total_ns = total;
        times.categories = d;
        if (auto caused = all_reduce_.caused.find({step_num, core_id}); caused != all_reduce_.caused.end()) {
          times.caused_wait_ns = caused->second.others_ns;
          times.delay_ns = caused->second.delay_ns;
        }
        auto& [count, sums] = per_core_sums_[core_id];
        ++count;
        for (int id = 1; id <= kMaxStepCategoryId; ++id) sums[id] += d[id];
        pod_total_ns += total;
        pod_sync_ns += at(d, StepCategory::kAllReduceSync);
      }
      if (map == nullptr) continue;
      const auto [first, last] =
          std::equal_range(channels_.channels.begin(), channels_.channels.end(), step_num, ByStep());
      for (auto c = first; c != last; ++c) *map->add_channel_db() = channel_info(*c);
      for (auto& op : all_reduce_ops_of_step(all_reduce_, step_num)) *map->add_all_reduce_op_db() = std::move(op);
    }
    counts().set_steps(static_cast<uint32_t>(records.size()));
    counts().set_steps_shown(static_cast<uint32_t>(db().pod_stats_sequence().pod_stats_map_size()));
    out_.set_all_reduce_sync_share(pod_total_ns > 0 ? static_cast<double>(pod_sync_ns) / pod_total_ns : 0.0);
  }

  // The steps the pod viewer's per-step records show: those holding the slowest channels (the summary names
  // them), the slowest steps (by their slowest core) and the rest evenly spaced.
  std::vector<bool> shown_steps(const std::map<int64_t, std::map<uint32_t, CategoryDurations>>& records) const {
    std::vector<int64_t> step_ns;
    std::map<int64_t, size_t> index_of;
    for (const auto& [step_num, cores] : records) {
      int64_t slowest = 0;
      for (const auto& [core_id, d] : cores) slowest = std::max(slowest, sum(d));
      index_of[step_num] = step_ns.size();
      step_ns.push_back(slowest);
    }
    std::vector<std::pair<double, int64_t>> channels;  // (duration, step)
    for (const ChannelSummary& c : channels_.channels) channels.emplace_back(c.duration_us, c.step_num);
    const size_t listed = std::min(kSlowestChannelsListed, channels.size());
    std::partial_sort(channels.begin(), channels.begin() + static_cast<std::ptrdiff_t>(listed), channels.end(),
                      [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<size_t> must_show;
    for (size_t i = 0; i < listed; ++i) {
      if (auto it = index_of.find(channels[i].second); it != index_of.end()) must_show.push_back(it->second);
    }
    return steps_shown(step_ns, must_show);
  }

  void add_record(podscope::v1::PodStatsMap& map, uint32_t step_num, uint32_t core_id, const CategoryDurations& d,
                  uint32_t replica_id) {
    const CoreIdentity& identity = identities_.at(core_id);
    podscope::v1::PodStatsRecord& r = (*map.mutable_pod_stats_per_core())[core_id];
    r.set_host_name(identity.host_name);
    r.set_chip_id(identity.chip_id);
    r.set_node_id(identity.node_id);
    r.set_step_num(step_num);
    r.set_total_duration_us(static_cast<double>(sum(d)) / 1e3);
    for (int id = 1; id <= kMaxStepCategoryId; ++id) {
      (*r.mutable_step_breakdown_us())[id] = static_cast<double>(d[id]) / 1e3;
    }
    r.set_bottleneck(std::string(step_category_info(largest_category(d)).display_name));
    (*map.mutable_core_id_to_replica_id_map())[core_id] = replica_id;
  }

  // One row of cores per host (we know no physical coordinates): a device plane is a chip of one core, at
  // x = its place on the host (in core id order), y = the host's row.
  void describe_topology() {
    std::map<int32_t, std::vector<uint32_t>> cores_per_node;
    for (const auto& [core_id, identity] : identities_) cores_per_node[identity.node_id].push_back(core_id);
    int32_t widest = 0;
    for (const auto& [node, cores] : cores_per_node) widest = std::max(widest, static_cast<int32_t>(cores.size()));
    auto& topology = *db().mutable_topology();
    topology.set_x_dimension(widest);
    topology.set_y_dimension(static_cast<int32_t>(cores_per_node.size()));
    topology.set_host_x_stride(widest);
    topology.set_host_y_stride(1);
    topology.set_num_cores_per_chip(1);
    int32_t row = 0;
    for (const auto& [node, cores] : cores_per_node) {
      for (size_t i = 0; i < cores.size(); ++i) {
        auto* location = topology.add_cores();
        location->set_x(static_cast<int32_t>(i));
        location->set_y(row);
        location->set_host_y(row);
        location->set_index_on_host(static_cast<int32_t>(i));
        location->set_global_id(static_cast<int32_t>(cores[i]));
      }
      ++row;
    }
  }

  void summarize_cores() {
    for (const auto& [core_id, entry] : per_core_sums_) {
      const auto& [count, sums] = entry;
      const CoreIdentity& identity = identities_.at(core_id);
      auto* core = out_.add_cores();
      core->set_core_id(core_id);
      core->set_host_name(identity.host_name);
      core->set_plane_name(core_of(core_id).core->plane_name());
      core->set_step_count(count);
      core->set_average_step_us(static_cast<double>(sum(sums)) / count / 1e3);
      for (int id = 1; id <= kMaxStepCategoryId; ++id) {
        (*core->mutable_average_breakdown_us())[id] = static_cast<double>(sums[id]) / count / 1e3;
      }
      core->set_bottleneck(std::string(step_category_info(largest_category(sums)).display_name));
    }
  }

  // Top ops across all device planes, by total time.
  void rank_top_ops() {
    struct Accumulator {
      uint64_t occurrences = 0;
      int64_t total_ns = 0;
      uint32_t cores = 0;
    };
    std::map<std::pair<std::string, OpKind>, Accumulator> top;
    for (const PodCore& core : pod_.cores) {
      if (core.core->kind() == podscope::v1::CORE_KIND_HOST) continue;
      for (const podscope::v1::CoreOp& op : core.core->ops()) {
        Accumulator& acc = top[{op.name(), static_cast<OpKind>(op.pod_kind())}];
        acc.occurrences += op.occurrences();
        acc.total_ns += op.total_ns();
        ++acc.cores;
      }
    }
    std::vector<std::pair<std::pair<std::string, OpKind>, Accumulator>> ranked(top.begin(), top.end());
    std::stable_sort(ranked.begin(), ranked.end(),
                     [](const auto& a, const auto& b) { return a.second.total_ns > b.second.total_ns; });
    if (ranked.size() > options_.top_op_count) ranked.resize(options_.top_op_count);
    for (const auto& [key, acc] : ranked) {
      auto* op = out_.add_top_ops();
      op->set_name(key.first);
      op->set_category(std::string(op_kind_name(key.second)));
      op->set_occurrences(acc.occurrences);
      op->set_total_us(static_cast<double>(acc.total_ns) / 1e3);
      op->set_core_count(acc.cores);
    }
  }

  void add_diagnostics() {
    const auto& n = out_.counts();
    auto& diagnostics = *db().mutable_diagnostics();
    if (n.unpaired_sends() + n.unpaired_recv_dones() > 0) {
      diagnostics.add_info(absl::StrCat("dropped ", n.unpaired_sends(), " sends and ", n.unpaired_recv_dones(),
                                        " recv-dones whose partner was outside the capture"));
    }
    if (n.planes_without_steps() > 0) {
      diagnostics.add_info(absl::StrCat("skipped ", n.planes_without_steps(), " device planes without steps"));
    }
    if (n.partial_steps_trimmed() > 0) {
      diagnostics.add_info(
          absl::StrCat("trimmed ", n.partial_steps_trimmed(), " partial steps at the edges of the capture window"));
    }
    for (const auto& w : warnings_) {
      diagnostics.add_warnings(w);
      db().mutable_summary()->add_warnings(w);
    }
  }

  const PodSteps& pod_;
  const PodAnalyzerOptions& options_;

  PodAnalysis out_;
  std::vector<std::string> warnings_;
  std::map<uint32_t, CoreIdentity> identities_;
  std::map<uint32_t, std::string> host_names_;
  std::set<std::string> device_kinds_;
  AllReduceResult all_reduce_;
  ChannelResult channels_;
  std::map<int64_t, std::map<uint32_t, CoreStepTimes>> step_times_;
  std::map<uint32_t, std::pair<uint32_t, CategoryDurations>> per_core_sums_;
};

}  // namespace

PodCoreId pod_core_id(const PodCore& core) {
  const CoreStepDatabase& db = *core.core;
  const auto ordinal = device_ordinal(db.plane_name());
  if (db.kind() == podscope::v1::CORE_KIND_HOST) {
    return {static_cast<uint32_t>(core.host_index) * kCoreIdsPerFile, 0};
  }
  if (db.kind() == podscope::v1::CORE_KIND_CUSTOM || !ordinal) {
    return {static_cast<uint32_t>(db.plane_id()), static_cast<int32_t>(db.plane_id())};
  }
  if (db.has_rank() && db.rank() >= 0 && db.rank() < kCoreIdsPerFile) {
    return {static_cast<uint32_t>(db.rank()), static_cast<int32_t>(*ordinal)};
  }
  return {static_cast<uint32_t>(core.host_index) * kCoreIdsPerFile + *ordinal, static_cast<int32_t>(*ordinal)};
}

PodAnalysis analyze_pod_steps(const PodSteps& pod, const PodAnalyzerOptions& options) {
  return PodAssembly(pod, options).build();
}

}  // namespace podscope::analysis
