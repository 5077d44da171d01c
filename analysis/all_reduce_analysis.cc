#include "analysis/all_reduce_analysis.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <string>
#include <string_view>

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
    matched[{c.instance->step_num, c.instance->match_key}].push_back(&c);
  }
  for (const auto& [key, occurrences] : matched) {
    int64_t shortest = std::numeric_limits<int64_t>::max();
    for (const CoreCollective* c : occurrences) shortest = std::min(shortest, c->instance->duration_ns);
    for (const CoreCollective* c : occurrences) {
      result.sync_ns[{key.first, c->core_id}] += c->instance->duration_ns - shortest;
    }
  }

  // Per step and name: occurrences over all cores, mean duration, largest payload, replica groups.
  struct OpAccumulator {
    uint32_t occurrences = 0;
    int64_t total_ns = 0;
    uint64_t bytes = 0;
    std::string_view replica_group;
  };
  std::map<int64_t, std::map<std::string_view, OpAccumulator>> by_step;
  for (const CoreCollective& c : collectives) {
    OpAccumulator& acc = by_step[c.instance->step_num][c.instance->name];
    ++acc.occurrences;
    acc.total_ns += c.instance->duration_ns;
    acc.bytes = std::max(acc.bytes, c.instance->bytes);
    if (acc.replica_group.empty()) acc.replica_group = c.instance->replica_group;
  }
  for (const auto& [step, ops] : by_step) {
    auto& out = result.ops_by_step[step];
    for (const auto& [name, acc] : ops) {
      podscope::v1::AllReduceOpInfo info;
      info.set_name(std::string(name));
      info.set_occurrences(acc.occurrences);
      info.set_duration_us(static_cast<double>(acc.total_ns) / acc.occurrences / 1e3);
      info.set_data_size(acc.bytes);
      for (auto& group : parse_replica_groups(acc.replica_group)) *info.add_replica_groups() = std::move(group);
      out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.duration_us() > b.duration_us(); });
  }
  return result;
}

}  // namespace podscope::analysis
