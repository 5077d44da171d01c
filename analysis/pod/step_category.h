// The categories a core's step time is broken down into, with the names the pod viewer's legacy JSON and
// the XProf PodViewerDatabase use for them. Category ids are the keys of PodStatsRecord.step_breakdown_us.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace podscope::analysis {

enum class StepCategory : int {
  kHighFlopsCompute = 1,
  kLowFlopsCompute = 2,
  kHostInfeed = 3,
  kHostOutfeed = 4,
  kAllReduceCompute = 5,
  kAllReduceSync = 6,
  kSend = 7,
  kRecvDone = 8,
  kHostToDevice = 9,
  kDeviceToHost = 10,
  kDeviceToDevice = 11,
  kIdle = 12,  // no op ran and no host work fills the time
  // The device's idle time that host work fills (the step model's host events: kernel launches, host compute,
  // compilation), as XProf's GPU step breakdown attributes it.
  kKernelLaunch = 13,
  kHostCompute = 14,
  kCompilation = 15,
};
inline constexpr int kMaxStepCategoryId = 15;

struct StepCategoryInfo {
  StepCategory category;
  std::string_view json_key;      // key in pod_viewer.json (legacy schema where one exists)
  std::string_view display_name;  // the `bottleneck` string and report labels
};

// Every category, in id order.
std::span<const StepCategoryInfo> all_step_categories();
const StepCategoryInfo& step_category_info(StepCategory category);

// Nanoseconds per category, indexed by category id (index 0 unused).
using CategoryDurations = std::array<int64_t, kMaxStepCategoryId + 1>;

inline int64_t& at(CategoryDurations& d, StepCategory c) { return d[static_cast<int>(c)]; }
inline int64_t at(const CategoryDurations& d, StepCategory c) { return d[static_cast<int>(c)]; }

// The category with the most time (ties go to the lower id).
StepCategory largest_category(const CategoryDurations& durations);

// The generic GPU step categories (as XProf's GPU step breakdown names them), each a sum of ours.
struct GenericCategory {
  std::string_view json_key;
  std::string_view display_name;
  std::span<const StepCategory> parts;
};
std::span<const GenericCategory> generic_gpu_categories();

}  // namespace podscope::analysis
