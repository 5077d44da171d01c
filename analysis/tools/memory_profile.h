// Allocator memory profile: TensorFlow's `MemoryAllocation` / `MemoryDeallocation` events (each carries its
// allocator's state after the activity: bytes_allocated, bytes_reserved, bytes_available, ...) into XProf's
// MemoryProfile, one per allocator: the timeline, the in-window peak with its time and step, the allocator's
// lifetime peak, and what was live at the peak. Planes are added one at a time; only the compact activity
// records of the allocators are kept until finish().
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "analysis/steps/plane_walk.h"
#include "podscope/v1/host_analysis.pb.h"
#include "tensorflow/memory_profile.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// XProf draws at most this many timeline points per allocator.
inline constexpr size_t kMaxMemoryTimelinePoints = 1000;

// Events that could not be used as they are, each counted and none fatal.
struct MemoryProfileWarnings {
  // An allocation or deallocation without allocator_name or bytes_allocated: left out of the profile.
  uint64_t events_missing_stats = 0;
  // An allocation at an address that was already live (its free was not recorded): the newer one is kept.
  uint64_t reused_live_addresses = 0;
};

// Frees of what was allocated before the window: any capture of a running program starts with memory live. Their
// bytes are in the allocator's totals that every event carries, so the profile accounts for them (what is live at
// the peak and not allocated in the window is its "unused preallocated device memory" row, which such memory joins);
// they are counted, not warned of.
struct EarlierAllocations {
  uint64_t frees = 0;
  int64_t bytes = 0;
};

struct MemoryProfileResult {
  tensorflow::profiler::MemoryProfile profile;
  MemoryProfileWarnings warnings;
  EarlierAllocations freed_from_before;
  uint64_t events = 0;  // allocation and deallocation events seen, used or not
};

class MemoryProfileBuilder final : public PlaneConsumer {
 public:
  MemoryProfileBuilder();
  ~MemoryProfileBuilder() override;
  // Lines of the host plane, where TensorFlow's allocators record their events (on any thread's line).
  static bool wants_line(std::string_view plane_name, std::string_view line_name);

  // Takes the memory events of a plane of file `file_index` (the host plane; others have none). Times are
  // moved onto the coordinator's clock with the plane's clock offset stat when it has one.
  // In a walk shared with other tools (plane_walk.h), or alone.
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override;
  void end_plane(size_t file_index) override;
  void add_plane(size_t file_index, const tensorflow::profiler::XPlane& plane) {
    read_plane_alone(*this, file_index, plane);
  }

  // One host's file as a part of the pod's profile (its activities, which the pod's time axis is drawn from): the
  // builder read that one file, as file 0.
  podscope::v1::MemoryPart take_part() &&;
  // A host's part, as the file `host_index` of the pod; `host_clock_offset_ns` (its step database's) moves its times
  // onto the coordinator's clock when its host plane stated no offset of its own.
  void add_part(size_t host_index, const podscope::v1::MemoryPart& part,
                std::optional<int64_t> host_clock_offset_ns = std::nullopt);

  // One PerAllocatorMemoryProfile per allocator, keyed by its name (by `<host>/<name>` when the run's memory
  // events come from more than one file).
  // The warnings are complete only here: deallocations are matched once each allocator's events are in time order.
  MemoryProfileResult finish(size_t max_timeline_points = kMaxMemoryTimelinePoints) &&;

 private:
  // One activity, compact: strings are interned per builder.
  struct Activity {
    int64_t time_ns = 0;
    bool allocation = true;
    int64_t bytes_reserved = 0;
    int64_t bytes_allocated = 0;
    int64_t bytes_available = 0;
    double fragmentation = 0;
    int64_t peak_bytes_in_use = 0;
    int64_t requested_bytes = 0;
    int64_t allocation_bytes = 0;
    uint64_t address = 0;
    int64_t step_id = -1;  // -1: not stated
    uint32_t op = 0;       // interned strings; 0 is ""
    uint32_t region_type = 0;
    uint32_t data_type = 0;
    uint32_t tensor_shape = 0;
  };
  struct Allocator {
    std::string name;
    std::string host;
    size_t file_index = 0;
    std::vector<Activity> activities;
  };
  struct Source {
    size_t file_index;
    std::string allocator;
    bool operator<(const Source& o) const {
      return std::tie(file_index, allocator) < std::tie(o.file_index, o.allocator);
    }
  };

  // The in-window peak (the last of equal ones: an index into the activities) and the lifetime peak.
  struct Peaks {
    size_t window_peak = 0;
    int64_t lifetime_peak_bytes = 0;
  };
  // A row of what was live at the peak: an allocation (its activity) or a special row.
  struct PeakRow {
    int64_t snapshot_index = -1;  // into the allocator's activities, or -1 for a special row
    int64_t special_index = -1;
    tensorflow::profiler::MemoryActivityMetadata metadata;

    auto sort_key() const {
      return std::tuple<int64_t, int64_t, const std::string&, const std::string&, const std::string&,
                        const std::string&>(-metadata.allocation_bytes(), -metadata.requested_bytes(),
                                            metadata.tf_op_name(), metadata.region_type(), metadata.data_type(),
                                            metadata.tensor_shape());
    }
  };

  uint32_t intern(std::string_view text);
  // One allocator's profile: its activities completed, its peak summarized, what was live at the peak, the timeline.
  tensorflow::profiler::PerAllocatorMemoryProfile profile_of(Allocator& allocator, int64_t origin_ns,
                                                             size_t max_timeline_points);
  // Activities by time: step ids where the event had none (the one after the last stated), deallocations described
  // by the allocation they free; and the peaks.
  Peaks complete_activities(std::vector<Activity>& acts);
  void summarize_peak(const std::vector<Activity>& acts, const Peaks& peaks, int64_t origin_ns,
                      tensorflow::profiler::PerAllocatorMemoryProfile& profile) const;
  // What was live at the peak, matched by address up to it, sorted; heap the window's allocations do not account
  // for was allocated before the window (or preallocated and unused): a special row, as the stack is.
  std::vector<PeakRow> rows_live_at_peak(const std::vector<Activity>& acts, size_t peak,
                                         tensorflow::profiler::PerAllocatorMemoryProfile& profile) const;
  // The rows, identical ones folded, each pointing at the one snapshot it keeps.
  void add_active_allocations(const std::vector<PeakRow>& rows, const std::vector<Activity>& acts, int64_t origin_ns,
                              tensorflow::profiler::PerAllocatorMemoryProfile& profile) const;
  tensorflow::profiler::MemoryProfileSnapshot snapshot_of(const Activity& a, int64_t origin_ns) const;
  tensorflow::profiler::MemoryActivityMetadata metadata_of(const Activity& a) const;

  std::map<Source, Allocator> allocators_;
  std::vector<std::string> strings_{""};
  absl::flat_hash_map<std::string, uint32_t> string_ids_{{"", 0}};
  std::map<size_t, std::string> host_names_;
  // The clock offset a plane with memory events stated (and its times were moved by), per file.
  std::map<size_t, int64_t> stated_offsets_;
  MemoryProfileWarnings warnings_;
  EarlierAllocations freed_from_before_;
  uint64_t events_ = 0;
  // The memory events of the plane being walked.
  class PlaneReader;
  std::unique_ptr<PlaneReader> plane_reader_;
};

// The memory profile of one host plane.
MemoryProfileResult xplane_to_memory_profile(const tensorflow::profiler::XPlane& host_plane);

}  // namespace podscope::analysis
