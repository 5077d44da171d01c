// Every /proc parser of the host collectors on the same bytes: each must return a status, never crash, loop or
// read out of bounds. Seeds: tests/data/proc.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "agent/collectors/cpu_collector.h"
#include "agent/collectors/disk_collector.h"
#include "agent/collectors/loadavg_collector.h"
#include "agent/collectors/memory_collector.h"
#include "agent/collectors/network_collector.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace podscope::agent;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CpuTimes total;
  std::vector<CpuTimes> per_core;
  (void)parse_proc_stat(text, "/proc/stat", total, per_core);
  std::vector<DiskCounters> disks;
  (void)parse_diskstats(text, "/proc/diskstats", disks);
  std::array<double, 3> load{};
  (void)parse_loadavg(text, "/proc/loadavg", load);
  MemInfo mem;
  (void)parse_meminfo(text, "/proc/meminfo", mem);
  std::vector<InterfaceCounters> interfaces;
  (void)parse_net_dev(text, "/proc/net/dev", interfaces);
  return 0;
}
