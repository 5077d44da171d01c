#include "analysis/pod/all_reduce_analysis.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <tuple>

#include "absl/container/flat_hash_map.h"

namespace podscope::analysis {

std::vector<podscope::v1::ReplicaGroup> parse_replica_groups(std::string_view text) {
  std::vector<podscope::v1::ReplicaGroup> groups;
  podscope::v1::ReplicaGroup current;
  int depth = 0;
  int64_t number = 0;
  bool in_number = false;
  auto flush_number = [&] {
    if (in_number) current.add_replica_ids(number);
    in_number = false;
    number = 0;
  };
  auto flush_group = [&] {
    flush_number();
    if (current.replica_ids_size() > 0) groups.push_back(current);
    current.Clear();
  };
  for (char ch : text) {
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      number = number * 10 + (ch - '0');
      in_number = true;
    } else if (ch == '{' || ch == '[') {
      if (depth > 0) flush_group();
      ++depth;
    } else if (ch == '}' || ch == ']') {
      flush_group();
      --depth;
    } else {
      flush_number();
    }
  }
  flush_group();
  return groups;
}

AllReduceResult analyze_all_reduces(const std::vector<CoreCollective>& collectives) {
  AllReduceResult result;
  // (step, match key) -> the occurrences on every core.
  absl::flat_hash_map<std::pair<int64_t, std::string_view>, std::vector<const CoreCollective*>> matched;
  for (const CoreCollective& c : collectives) {
    matched[{c.instance->step_num(), c.instance->match_key()}].push_back(&c);
  }
  for (const auto& [key, occurrences] : matched) {
    int64_t shortest = std::numeric_limits<int64_t>::max();
    for (const CoreCollective* c : occurrences) shortest = std::min(shortest, c->instance->duration_ns());
    int64_t waited = 0;
    int64_t least_wait = std::numeric_limits<int64_t>::max();  // of the cores that did wait
    int64_t last = 0;                                          // cores with the shortest duration
    for (const CoreCollective* c : occurrences) {
      const int64_t sync = c->instance->duration_ns() - shortest;
      result.sync_ns[{key.first, c->core_id}] += sync;
      waited += sync;
      if (sync == 0) {
        ++last;
      } else {
        least_wait = std::min(least_wait, sync);
      }
    }
    if (occurrences.size() < 2 || waited == 0) continue;
    for (const CoreCollective* c : occurrences) {
      if (c->instance->duration_ns() != shortest) continue;
      CausedWait& caused = result.caused[{key.first, c->core_id}];
      caused.others_ns += waited / last;
      if (last == 1) caused.delay_ns += least_wait;
    }
  }

  // Per step and name: occurrences over all cores, mean duration, largest payload, replica group.
  std::vector<const podscope::v1::Collective*> by_step(collectives.size());
  std::transform(collectives.begin(), collectives.end(), by_step.begin(),
                 [](const CoreCollective& c) { return c.instance; });
  std::stable_sort(
      by_step.begin(), by_step.end(), [](const podscope::v1::Collective* a, const podscope::v1::Collective* b) {
        return std::forward_as_tuple(a->step_num(), a->name()) < std::forward_as_tuple(b->step_num(), b->name());
      });
  for (const podscope::v1::Collective* c : by_step) {
    if (result.ops.empty() || result.ops.back().step_num != c->step_num() || result.ops.back().name != c->name()) {
      AllReduceOpSummary op;
      op.step_num = c->step_num();
      op.name = c->name();
      result.ops.push_back(op);
    }
    AllReduceOpSummary& op = result.ops.back();
    ++op.occurrences;
    op.total_ns += c->duration_ns();
    op.bytes = std::max(op.bytes, c->bytes());
    if (op.replica_group.empty()) op.replica_group = c->replica_group();
  }
  return result;
}

std::vector<podscope::v1::AllReduceOpInfo> all_reduce_ops_of_step(const AllReduceResult& result, int64_t step_num) {
  const auto first = std::partition_point(result.ops.begin(), result.ops.end(),
                                          [&](const AllReduceOpSummary& op) { return op.step_num < step_num; });
  std::vector<podscope::v1::AllReduceOpInfo> out;
  for (auto op = first; op != result.ops.end() && op->step_num == step_num; ++op) {
    podscope::v1::AllReduceOpInfo info;
    info.set_name(std::string(op->name));
    info.set_occurrences(op->occurrences);
    info.set_duration_us(static_cast<double>(op->total_ns) / op->occurrences / 1e3);
    info.set_data_size(op->bytes);
    for (auto& group : parse_replica_groups(op->replica_group)) *info.add_replica_groups() = std::move(group);
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.duration_us() > b.duration_us(); });
  return out;
}

}  // namespace podscope::analysis
