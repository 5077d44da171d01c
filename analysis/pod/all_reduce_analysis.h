// All-reduce sync vs compute: the same collective (same match key within a step) on every participating
// core; its compute is the shortest of those durations, each core's sync is its duration minus that. The core with the
// shortest one arrived last: the others' sync in that collective is the wait it caused.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "podscope/v1/step_database.pb.h"
#include "podscope/v1/pod_viewer.pb.h"

namespace podscope::analysis {

struct CoreCollective {
  uint32_t core_id = 0;
  const podscope::v1::Collective* instance = nullptr;
};

// One collective name in one step, summed over its occurrences on every core. Its AllReduceOpInfo is made only for
// the steps the pod viewer shows (all_reduce_ops_of_step), most steps being summed and not shown.
struct AllReduceOpSummary {
  int64_t step_num = 0;
  std::string_view name;  // a view into the step database
  uint32_t occurrences = 0;
  int64_t total_ns = 0;
  uint64_t bytes = 0;
  std::string_view replica_group;  // the first occurrence's that has one
};

// The wait one core caused the others in one step, summed over the collectives it arrived at last.
struct CausedWait {
  // The other cores' sync in those collectives, in total (cores that arrived last together share it).
  int64_t others_ns = 0;
  // How much later it arrived than the last of the others: the time each of those collectives, and so the step,
  // waited for it alone (0 where another core arrived with it).
  int64_t delay_ns = 0;
};

struct AllReduceResult {
  // (step, core) -> the core's sync time in that step, summed over its collectives.
  absl::flat_hash_map<std::pair<int64_t, uint32_t>, int64_t> sync_ns;
  // (step, core) -> the wait it caused, for the cores that arrived last at some collective of the step.
  absl::flat_hash_map<std::pair<int64_t, uint32_t>, CausedWait> caused;
  std::vector<AllReduceOpSummary> ops;  // by step, then name
};

AllReduceResult analyze_all_reduces(const std::vector<CoreCollective>& collectives);
// The step's collectives as the pod viewer shows them, longest first.
std::vector<podscope::v1::AllReduceOpInfo> all_reduce_ops_of_step(const AllReduceResult& result, int64_t step_num);

// "0,1,2,3" or "{0,1},{2,3}" or "[[0,1],[2,3]]" -> replica groups; anything else gives none.
std::vector<podscope::v1::ReplicaGroup> parse_replica_groups(std::string_view text);

}  // namespace podscope::analysis
