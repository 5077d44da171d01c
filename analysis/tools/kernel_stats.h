// GPU kernel statistics: every kernel launch on the stream lines of `/device:GPU:*` planes (events with a
// `kernel_details` stat and a duration), folded by kernel name, launch configuration and op into XProf's
// KernelStatsDb. Planes are added one at a time (each plane's kernels are folded as it passes), so a
// reader never holds more than one plane.
//
// A kernel's op: its TF op stat (`tf_op`, `level 0`, `annotation`), else its `framework_op` stat (the PyTorch op
// that launched it, named in full: `aten::mm`), else the annotated op of its process that
// launched it: the kernel's `correlation_id` is its launch's on `/host:CUPTI` (a `...Launch...` API call on the
// line of the launching thread), and the innermost event on the same thread's line of a `/device:CUSTOM:` plane
// of the same file that encloses the launch in time is the op. Those planes may come in any order, so kernels
// without an op stat wait, compactly, with the file's launches and annotated spans, until the file ends.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "analysis/steps/plane_walk.h"
#include "podscope/v1/host_analysis.pb.h"
#include "tensorflow/kernel_stats.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

// XProf shows at most this many kernel rows.
inline constexpr size_t kMaxKernelReports = 1000;

// A kernel's launch configuration as `kernel_details` states it. Two forms exist: TF's current
// `regs:R static_shared:S dynamic_shared:D grid:x,y,z block:x,y,z occ_pct:P` and the older
// `regs:R shm:S grid:x,y,z block:x,y,z`, whose shared memory is the static amount.
struct KernelLaunch {
  uint32_t registers_per_thread = 0;
  uint32_t static_shmem_bytes = 0;
  uint32_t dynamic_shmem_bytes = 0;
  std::array<uint32_t, 3> grid{1, 1, 1};
  std::array<uint32_t, 3> block{1, 1, 1};
  float occupancy_pct = 0;  // 0: not stated
};

// Nullopt when the text states nothing recognisable or a known field has a value that does not parse (a
// dimension that is not three numbers, a number out of range); unknown fields are skipped.
std::optional<KernelLaunch> parse_kernel_details(std::string_view kernel_details);

// Whether the kernel's name matches one of the kernel-name patterns XProf takes for tensor-core kernels.
bool kernel_name_suggests_tensor_core(std::string_view kernel_name);
// Whether an op of this name can run on tensor cores (convolutions, matrix multiplications, cuDNN RNNs):
// XProf's list, matched on the op's name.
bool op_is_tensor_core_eligible(std::string_view op_name);
// The op's name from a TF op stat: `name:Type` → `name`; an annotation's innermost op (`outer::inner`)
// without its `#key=value#` suffix.
std::string_view op_name_of(std::string_view tf_op_fullname);

// Kernel launches that could not be read as such: each is still counted in the kernel time, with the
// default launch configuration.
struct KernelStatsWarnings {
  uint64_t corrupt_kernel_details = 0;
};

struct KernelStatsResult {
  tensorflow::profiler::KernelStatsDb db;
  KernelStatsWarnings warnings;
  uint64_t kernel_launches = 0;
  // Launches whose op came from the annotation enclosing their CUPTI launch (no op stat of their own).
  uint64_t launches_attributed_by_correlation = 0;
  // Every launch's duration summed, the rows cut from the database included.
  uint64_t kernel_time_ns = 0;
  uint64_t reports_cut = 0;  // rows beyond the limit
};

// Kernels of the planes added so far, folded by (name, launch configuration, tensor-core use, op).
class KernelStatsBuilder final : public PlaneConsumer {
 public:
  KernelStatsBuilder();
  ~KernelStatsBuilder() override;
  // The stream lines of GPU planes (`Stream #<id>(<kinds>)`: the derived lines, TensorFlow Ops, Steps..., repeat
  // the kernels' time), the thread lines of `/host:CUPTI` and the op lines of annotated cores.
  static bool wants_line(std::string_view plane_name, std::string_view line_name);

  // Folds in the kernels of `plane` (of the file being read), and keeps the launches of a `/host:CUPTI` plane and
  // the annotated spans of a `/device:CUSTOM:` plane until the file ends; other planes are ignored.
  // In a walk shared with other tools (plane_walk.h), or alone.
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override;
  void end_plane(size_t file_index) override;
  void add_plane(const tensorflow::profiler::XPlane& plane) { read_plane_alone(*this, 0, plane); }
  // Every plane of the file was added: its kernels without an op stat take the op that launched them.
  void end_file();

  // One host's file as a part of the pod's kernel stats: every row, by key, and the counts. Ends the file.
  podscope::v1::KernelStatsPart take_part() &&;
  // A host's part: its rows folded into the same rows of the other hosts'.
  void add_part(size_t host_index, const podscope::v1::KernelStatsPart& part);

  // The reports sorted by total duration (longest first, then by key), at most `max_reports` of them. Ends the
  // file being read.
  KernelStatsResult finish(size_t max_reports = kMaxKernelReports) &&;

 private:
  // Everything that tells two kernel rows apart.
  struct Key {
    std::string name;
    KernelLaunch launch;
    bool uses_tensor_core = false;
    bool op_tensor_core_eligible = false;
    std::string op_name;

    auto tied() const {
      return std::tie(name, launch.grid, launch.block, launch.registers_per_thread, launch.static_shmem_bytes,
                      launch.dynamic_shmem_bytes, uses_tensor_core, op_tensor_core_eligible, op_name);
    }
    bool operator==(const Key& other) const { return tied() == other.tied(); }
    template <typename H>
    friend H AbslHashValue(H h, const Key& k) {
      return H::combine(std::move(h), k.name, k.launch.grid, k.launch.block, k.launch.registers_per_thread,
                        k.launch.static_shmem_bytes, k.launch.dynamic_shmem_bytes, k.uses_tensor_core,
                        k.op_tensor_core_eligible, k.op_name);
    }
  };
  struct Totals {
    uint64_t occurrences = 0;
    uint64_t total_ns = 0;
    uint64_t min_ns = 0;
    uint64_t max_ns = 0;
    float occupancy_pct = 0;
  };

  // A kernel without an op stat, waiting for the file's end: its key (in pending_keys_) and duration.
  struct PendingKernel {
    int64_t correlation_id = 0;
    uint32_t key = 0;
    uint64_t duration_ns = 0;
  };
  // A CUDA launch call on /host:CUPTI.
  struct Launch {
    int64_t correlation_id = 0;
    int64_t thread_id = 0;
    int64_t time_ns = 0;
  };
  // An event on an annotated core's thread line; its name in span_names_.
  struct Span {
    int64_t start_ns = 0;
    int64_t end_ns = 0;
    uint32_t name = 0;
  };

  void add_gpu_plane(const tensorflow::profiler::XPlane& plane);
  void add_cupti_plane(const tensorflow::profiler::XPlane& plane);
  // The spans of a custom plane's op lines, read in the walk.
  class CustomSpanReader;
  static Key key_of(std::string_view kernel, std::string_view details, std::string_view op_name,
                    std::optional<std::string_view> equation);
  void fold(Key key, uint64_t duration_ns);
  static tensorflow::profiler::KernelReport report_of(const Key& key, const Totals& totals);
  static void add_launch(Totals& totals, float occupancy_pct, uint64_t duration_ns);
  // Correlation id → the name of the innermost annotated span around its launch on the same thread.
  absl::flat_hash_map<int64_t, uint32_t> ops_of_launches();

  absl::node_hash_map<Key, Totals> reports_;  // node-based: a plane's pass keeps pointers to its rows
  KernelStatsWarnings warnings_;
  uint64_t launches_ = 0;
  uint64_t kernel_time_ns_ = 0;
  uint64_t attributed_by_correlation_ = 0;
  // The file being read.
  std::vector<PendingKernel> pending_;
  std::vector<Key> pending_keys_;
  absl::flat_hash_map<Key, uint32_t> pending_key_ids_;
  std::vector<Launch> launches_of_file_;
  absl::flat_hash_map<int64_t, std::vector<Span>> spans_by_thread_;
  std::unique_ptr<CustomSpanReader> custom_spans_;  // of the plane being walked
  std::vector<std::string> span_names_;
  absl::flat_hash_map<std::string, uint32_t> span_name_ids_;
};

// The kernel stats of one plane (all its rows).
KernelStatsResult xplane_to_kernel_stats(const tensorflow::profiler::XPlane& plane);

}  // namespace podscope::analysis
