#include "agent/collectors/host_collectors.h"

#include "agent/collectors/clock_health_collector.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/collectors/disk_collector.h"
#include "agent/collectors/loadavg_collector.h"
#include "agent/collectors/memory_collector.h"
#include "agent/collectors/network_collector.h"

namespace podscope::agent {

HostCollectors make_host_collectors() {
  HostCollectors host;
  auto cpu = std::make_unique<CpuCollector>();
  host.cpu = cpu.get();
  host.all.push_back(std::move(cpu));
  host.all.push_back(std::make_unique<MemoryCollector>());
  host.all.push_back(std::make_unique<NetworkCollector>());
  host.all.push_back(std::make_unique<DiskCollector>());
  host.all.push_back(std::make_unique<LoadAvgCollector>());
  auto clock_health = std::make_unique<ClockHealthCollector>();
  host.clock_health = clock_health.get();
  host.all.push_back(std::move(clock_health));
  return host;
}

}  // namespace podscope::agent
