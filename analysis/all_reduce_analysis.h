// All-reduce sync vs compute: the same collective (same match key within a step) on every participating
// core; its compute is the shortest of those durations, each core's sync is its duration minus that.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "analysis/core_trace.h"
#include "podscope/v1/pod_viewer.pb.h"

namespace podscope::analysis {

struct CoreCollective {
  uint32_t core_id = 0;
  const CollectiveInstance* instance = nullptr;
};

struct AllReduceResult {
  // (step, core) -> the core's sync time in that step, summed over its collectives.
  std::map<std::pair<int64_t, uint32_t>, int64_t> sync_ns;
  // step -> one AllReduceOpInfo per collective name.
  std::map<int64_t, std::vector<podscope::v1::AllReduceOpInfo>> ops_by_step;
};

AllReduceResult analyze_all_reduces(const std::vector<CoreCollective>& collectives);

// "0,1,2,3" or "{0,1},{2,3}" or "[[0,1],[2,3]]" -> replica groups; anything else gives none.
std::vector<podscope::v1::ReplicaGroup> parse_replica_groups(std::string_view text);

}  // namespace podscope::analysis
