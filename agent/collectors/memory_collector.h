// MemoryCollector: /proc/meminfo — total, free, available, buffers, cached, swap — and the memory in use
// (total − available), the figure a capture shows as a track.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "agent/collectors/proc_file_collector.h"
#include "agent/collectors/proc_text.h"

namespace podscope::agent {

struct MemInfo {
  // Bytes, in the order of kMemInfoFields; -1 where the file lacks the field.
  std::array<int64_t, 7> bytes{};
};
inline constexpr std::array<std::string_view, 7> kMemInfoFields = {"MemTotal", "MemFree",   "MemAvailable", "Buffers",
                                                                   "Cached",   "SwapTotal", "SwapFree"};

absl::Status parse_meminfo(std::string_view text, std::string_view path, MemInfo& info);

class MemoryCollector final : public ProcFileCollector {
 public:
  explicit MemoryCollector(std::string path = "/proc/meminfo");
  std::string_view name() const override { return "memory"; }

 private:
  absl::Status record(std::string_view text, int64_t now_ns, SampleSink& sink) override;
  MemInfo info_;
  bool declared_ = false;
  std::array<SeriesId, 7> ids_{};
  SeriesId used_ = 0;
};

}  // namespace podscope::agent
