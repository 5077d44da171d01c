// /proc parsers and host collectors on fixture files (tests/data/proc), including malformed and truncated
// ones: no crash, a reason naming the file and line, the collector marked degraded.
#include <gtest/gtest.h>
#include <sys/timex.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/collectors/clock_health_collector.h"
#include "agent/collectors/cpu_collector.h"
#include "agent/collectors/disk_collector.h"
#include "agent/collectors/loadavg_collector.h"
#include "agent/collectors/memory_collector.h"
#include "agent/collectors/network_collector.h"
#include "tests/agent/collectors/recording_sink.h"
#include "tests/scratch_directory.h"

namespace podscope::agent {
namespace {

namespace fs = std::filesystem;
using testing::RecordingSink;

std::string fixture(const std::string& name) { return std::string(PODSCOPE_SOURCE_DIR) + "/tests/data/proc/" + name; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A writable copy of a fixture, so a test can change it between passes (same inode: the collector keeps it open).
class ScratchFile {
 public:
  explicit ScratchFile(const std::string& fixture_name) : scratch_("collector"), path_(scratch_.file(fixture_name)) {
    set(fixture_name);
  }
  void set(const std::string& fixture_name) {
    std::ofstream(path_, std::ios::trunc) << read_file(fixture(fixture_name));
  }
  const std::string& path() const { return path_; }

 private:
  podscope::testing::ScratchDirectory scratch_;
  std::string path_;
};

TEST(ProcStat, ParsesTotalAndCoresInNodeExporterModes) {
  CpuTimes total;
  std::vector<CpuTimes> cores;
  ASSERT_TRUE(parse_proc_stat(read_file(fixture("stat")), "stat", total, cores).ok());
  EXPECT_EQ(total.cpu, -1);
  EXPECT_EQ(total.jiffies[0], 1000u);  // user
  EXPECT_EQ(total.jiffies[7], 2u);     // steal
  ASSERT_EQ(cores.size(), 2u);
  EXPECT_EQ(cores[1].cpu, 1);
  EXPECT_EQ(cores[0].idle(), 4025u);
}

TEST(ProcStat, TruncatedAndMalformedAreErrorsNamingFileAndLine) {
  CpuTimes total;
  std::vector<CpuTimes> cores;
  absl::Status s = parse_proc_stat(read_file(fixture("stat_truncated")), "/proc/stat", total, cores);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "/proc/stat: line 3: cpu line 'cpu1' has 2 fields, expected at least 4");
  s = parse_proc_stat(read_file(fixture("stat_malformed")), "/proc/stat", total, cores);
  EXPECT_EQ(s.message(), "/proc/stat: line 2: cpu line 'cpu0' field 3 is not a number: 'abc'");
  s = parse_proc_stat("", "/proc/stat", total, cores);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("no 'cpu' total line"), std::string::npos);
}

TEST(CpuCollector, SecondsPerModeAndUtilizationFromDeltas) {
  ScratchFile file("stat");
  CpuCollector cpu(file.path());
  RecordingSink sink;
  cpu.sample(1, sink);
  EXPECT_EQ(cpu.status().state, CollectorState::State::kOk);
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  EXPECT_DOUBLE_EQ(*sink.last("podscope_cpu_seconds_total", {{"cpu", "0"}, {"mode", "user"}}), 500 / hz);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_cpu_seconds_total", {{"cpu", "1"}, {"mode", "idle"}}), 4000 / hz);
  // No utilization before there is a delta.
  EXPECT_EQ(sink.last("podscope_cpu_utilization_ratio", {{"cpu", "0"}}), std::nullopt);

  file.set("stat_later");
  cpu.sample(2, sink);
  // cpu0: +100 user +100 system, no idle → fully busy; cpu1: +200 idle only → idle.
  EXPECT_DOUBLE_EQ(*sink.last("podscope_cpu_utilization_ratio", {{"cpu", "0"}}), 1.0);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_cpu_utilization_ratio", {{"cpu", "1"}}), 0.0);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_host_cpu_utilization_ratio"), 0.5);
  EXPECT_EQ(cpu.totals().cores, 2);

  const size_t declared = sink.series_count();
  cpu.sample(3, sink);
  EXPECT_EQ(sink.series_count(), declared) << "steady state declares nothing new";
}

TEST(CpuCollector, MalformedFileDegradesWithTheReasonAndRecovers) {
  ScratchFile file("stat");
  CpuCollector cpu(file.path());
  RecordingSink sink;
  cpu.sample(1, sink);
  file.set("stat_malformed");
  cpu.sample(2, sink);
  CollectorState st = cpu.status();
  EXPECT_EQ(st.state, CollectorState::State::kDegraded);
  EXPECT_NE(st.reason.find(file.path() + ": line 2"), std::string::npos) << st.reason;
  file.set("stat_later");
  cpu.sample(3, sink);
  EXPECT_EQ(cpu.status().state, CollectorState::State::kOk);
}

TEST(CpuCollector, MissingFileIsUnavailable) {
  CpuCollector cpu("/nonexistent/stat");
  RecordingSink sink;
  cpu.sample(1, sink);
  EXPECT_EQ(cpu.status().state, CollectorState::State::kUnavailable);
  EXPECT_NE(cpu.status().reason.find("/nonexistent/stat"), std::string::npos);
}

TEST(MemoryCollector, BytesAndUsedFromMeminfo) {
  MemoryCollector mem(fixture("meminfo"));
  RecordingSink sink;
  mem.sample(1, sink);
  ASSERT_EQ(mem.status().state, CollectorState::State::kOk) << mem.status().reason;
  EXPECT_EQ(sink.last("podscope_memory_total_bytes"), 16384000.0 * 1024);
  EXPECT_EQ(sink.last("podscope_memory_available_bytes"), 8192000.0 * 1024);
  EXPECT_EQ(sink.last("podscope_memory_used_bytes"), (16384000.0 - 8192000.0) * 1024);
}

TEST(MemoryCollector, TruncatedMeminfoDegrades) {
  MemoryCollector mem(fixture("meminfo_truncated"));
  RecordingSink sink;
  mem.sample(1, sink);
  EXPECT_EQ(mem.status().state, CollectorState::State::kDegraded);
  EXPECT_NE(mem.status().reason.find("meminfo_truncated: line 2"), std::string::npos) << mem.status().reason;
}

TEST(MemoryCollector, ValueTooLargeForBytesIsAParseErrorNotAnOverflow) {
  MemInfo info;
  const absl::Status s =
      parse_meminfo("MemTotal: 16384000 kB\nMemFree: 8198552921648689596 kB\n", "/proc/meminfo", info);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/proc/meminfo: line 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("too large"), std::string::npos) << s.message();
}

TEST(NetworkCollector, CountersPerInterfaceNamedAsNodeExporterNamesThem) {
  NetworkCollector net(fixture("net_dev"));
  RecordingSink sink;
  net.sample(1, sink);
  ASSERT_EQ(net.status().state, CollectorState::State::kOk) << net.status().reason;
  EXPECT_EQ(sink.last("podscope_network_receive_bytes_total", {{"device", "eth0"}}), 9876543);
  EXPECT_EQ(sink.last("podscope_network_receive_packets_total", {{"device", "eth0"}}), 20000);
  EXPECT_EQ(sink.last("podscope_network_receive_errs_total", {{"device", "eth0"}}), 1);
  EXPECT_EQ(sink.last("podscope_network_receive_drop_total", {{"device", "eth0"}}), 2);
  EXPECT_EQ(sink.last("podscope_network_transmit_errs_total", {{"device", "eth0"}}), 3);
  EXPECT_EQ(sink.last("podscope_network_transmit_drop_total", {{"device", "eth0"}}), 4);
  EXPECT_EQ(sink.last("podscope_network_transmit_bytes_total", {{"device", "lo"}}), 123456);
}

TEST(NetworkCollector, MalformedDegrades) {
  NetworkCollector net(fixture("net_dev_malformed"));
  RecordingSink sink;
  net.sample(1, sink);
  EXPECT_EQ(net.status().state, CollectorState::State::kDegraded);
  EXPECT_NE(net.status().reason.find("line 3: interface 'eth0' has 3 columns"), std::string::npos)
      << net.status().reason;
}

TEST(DiskCollector, WholeDevicesOnlyInBytesAndSeconds) {
  DiskCollector disk(fixture("diskstats"));
  RecordingSink sink;
  disk.sample(1, sink);
  ASSERT_EQ(disk.status().state, CollectorState::State::kOk) << disk.status().reason;
  EXPECT_EQ(sink.last("podscope_disk_read_bytes_total", {{"device", "sda"}}), 20000.0 * 512);
  EXPECT_EQ(sink.last("podscope_disk_written_bytes_total", {{"device", "nvme0n1"}}), 8000.0 * 512);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_disk_io_time_seconds_total", {{"device", "sda"}}), 1.2);
  EXPECT_FALSE(sink.find("podscope_disk_read_bytes_total", {{"device", "sda1"}}));
  EXPECT_FALSE(sink.find("podscope_disk_read_bytes_total", {{"device", "loop0"}}));
  EXPECT_FALSE(sink.find("podscope_disk_read_bytes_total", {{"device", "nvme0n1p1"}}));
}

TEST(DiskCollector, MalformedDegrades) {
  DiskCollector disk(fixture("diskstats_malformed"));
  RecordingSink sink;
  disk.sample(1, sink);
  EXPECT_EQ(disk.status().state, CollectorState::State::kDegraded);
  EXPECT_NE(disk.status().reason.find("device 'sda' column 7 is not a number: 'x'"), std::string::npos)
      << disk.status().reason;
}

TEST(IgnoredDisks, MatchNodeExporterDefaults) {
  for (const char* d : {"sda1", "vdb2", "xvda1", "nvme0n1p3", "mmcblk0p1", "loop7", "ram0", "fd0"}) {
    EXPECT_TRUE(is_ignored_disk(d)) << d;
  }
  for (const char* d : {"sda", "vdb", "nvme0n1", "mmcblk0", "dm-0", "md0"}) EXPECT_FALSE(is_ignored_disk(d)) << d;
}

TEST(LoadAvgCollector, ThreeAveragesAndMalformed) {
  LoadAvgCollector good(fixture("loadavg"));
  RecordingSink sink;
  good.sample(1, sink);
  EXPECT_DOUBLE_EQ(*sink.last("podscope_load5"), 0.58);
  LoadAvgCollector bad(fixture("loadavg_malformed"));
  bad.sample(1, sink);
  EXPECT_EQ(bad.status().state, CollectorState::State::kDegraded);
  EXPECT_NE(bad.status().reason.find("load average 2 is not a number: 'zero'"), std::string::npos);
}

TEST(ClockHealth, UnsynchronizedClockIsNamedWithTheKernelsFigures) {
  ClockHealth unsync = clock_health_from_timex(TIME_ERROR, STA_UNSYNC, 16000000, 16000000);
  EXPECT_FALSE(unsync.synchronized);
  EXPECT_NE(unsync.detail.find("not synchronized"), std::string::npos);
  EXPECT_NE(unsync.detail.find("STA_UNSYNC"), std::string::npos);
  ClockHealth ok = clock_health_from_timex(TIME_OK, 0, 12, 3);
  EXPECT_TRUE(ok.synchronized);
  EXPECT_DOUBLE_EQ(ok.max_error_s, 12e-6);
}

TEST(ClockHealthCollector, ReportsOnThisHost) {
  ClockHealthCollector clock;
  RecordingSink sink;
  clock.sample(1, sink);
  const double synced = *sink.last("podscope_clock_synchronized");
  EXPECT_TRUE(synced == 0 || synced == 1);
  EXPECT_EQ(clock.health().synchronized, synced == 1);
  EXPECT_FALSE(clock.health().detail.empty());
}

}  // namespace
}  // namespace podscope::agent
