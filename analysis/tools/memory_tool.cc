// The memory profile (memory_profile.h): reads the host plane's allocator events; a host's part is its allocators'
// activities (the pod's profile is drawn on one time axis); its tab shows per allocator its summary, timeline and the
// allocations live at its peak (with only the snapshots those name).
#include "analysis/rendering/json_writer.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/tool_pages.h"
#include "analysis/tools/tool.h"

namespace podscope::analysis {
namespace {

// What the tab draws of what was live at each allocator's peak.
constexpr int kTabLiveAllocations = 30;

tensorflow::profiler::MemoryProfile tab_profile(const tensorflow::profiler::MemoryProfile& profile) {
  tensorflow::profiler::MemoryProfile out;
  *out.mutable_memory_ids() = profile.memory_ids();
  out.set_num_hosts(profile.num_hosts());
  for (const auto& [id, allocator] : profile.memory_profile_per_allocator()) {
    tensorflow::profiler::PerAllocatorMemoryProfile& kept = (*out.mutable_memory_profile_per_allocator())[id];
    *kept.mutable_profile_summary() = allocator.profile_summary();
    *kept.mutable_sampled_timeline_snapshots() = allocator.sampled_timeline_snapshots();
    *kept.mutable_special_allocations() = allocator.special_allocations();
    for (int i = 0; i < allocator.active_allocations_size() && i < kTabLiveAllocations; ++i) {
      tensorflow::profiler::ActiveAllocation live = allocator.active_allocations(i);
      const int64_t index = live.snapshot_index();
      if (index >= 0 && index < allocator.memory_profile_snapshots_size()) {
        live.set_snapshot_index(kept.memory_profile_snapshots_size());
        *kept.add_memory_profile_snapshots() = allocator.memory_profile_snapshots(static_cast<int>(index));
      }
      *kept.add_active_allocations() = std::move(live);
    }
  }
  return out;
}

class MemoryToolResult final : public ToolValue<MemoryProfileResult> {
 public:
  using ToolValue::ToolValue;
  std::vector<ToolFile> files(const AnalysisOutcome&) const override {
    std::vector<ToolFile> files;
    files.push_back({"memory_profile.pb", xspace::serialize_deterministically(value.profile)});
    files.push_back({"memory_profile.json", render_memory_profile_json(value.profile)});
    return files;
  }
  std::string page(const AnalysisOutcome&) const override { return render_memory_profile_page(value); }
  absl::StatusOr<std::string> tab_json(const AnalysisOutcome&) const override {
    return tab_json_of(tab_profile(value.profile));
  }
  std::string warnings() const override { return render_memory_profile_warnings(value); }
};

// Every host's allocators, each host's as its file's, profiled on the pod's time axis (each host's times moved by
// its clock offset when its part was read without one).
std::unique_ptr<ToolResult> finish(const ToolInput& input, AnalysisOutcome&) {
  MemoryProfileBuilder builder;
  for (size_t i = 0; i < input.parts.size(); ++i) {
    podscope::v1::MemoryPart part;
    if (!part.ParseFromString(*input.parts[i])) continue;
    const bool known = i < input.pod.hosts.size() && input.pod.hosts[i].has_clock_offset_ns();
    builder.add_part(i, part, known ? std::optional<int64_t>(input.pod.hosts[i].clock_offset_ns()) : std::nullopt);
  }
  return std::make_unique<MemoryToolResult>(std::move(builder).finish());
}

}  // namespace

ToolParts memory_tool() {
  return {&MemoryProfileBuilder::wants_line, &make_part_builder<HostPartOf<MemoryProfileBuilder>>, &finish};
}

}  // namespace podscope::analysis
