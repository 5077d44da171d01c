// The host collectors every agent samples on its pass, made in one place so that the agent, its benchmark
// and the allocation test sample exactly the same set.
#pragma once

#include <memory>
#include <vector>

#include "agent/collectors/collector.h"

namespace podscope::agent {

class CpuCollector;
class ClockHealthCollector;

struct HostCollectors {
  std::vector<std::unique_ptr<Collector>> all;   // in sampling order
  CpuCollector* cpu = nullptr;                   // owned by `all`; Monitor reads its utilization
  ClockHealthCollector* clock_health = nullptr;  // owned by `all`; status and capture warnings read it
};

// cpu, memory, network, disk, loadavg, clock health.
HostCollectors make_host_collectors();

}  // namespace podscope::agent
