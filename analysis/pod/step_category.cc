#include "analysis/pod/step_category.h"

namespace podscope::analysis {
namespace {

using C = StepCategory;

constexpr std::array<StepCategoryInfo, kMaxStepCategoryId> kCategories = {{
    {C::kHighFlopsCompute, "highFlopsComputeUs", "High flops compute"},
    {C::kLowFlopsCompute, "lowFlopsComputeUs", "Low flops compute"},
    {C::kHostInfeed, "hostInfeedDurationUs", "Infeed"},
    {C::kHostOutfeed, "hostOutfeedDurationUs", "Outfeed"},
    {C::kAllReduceCompute, "allReduceComputeDurationUs", "AllReduce compute"},
    {C::kAllReduceSync, "allReduceSyncDurationUs", "AllReduce sync"},
    {C::kSend, "sendDurationUs", "Send"},
    {C::kRecvDone, "recvDurationUs", "Recv-done"},
    {C::kHostToDevice, "hostToDeviceDurationUs", "Host to device"},
    {C::kDeviceToHost, "deviceToHostDurationUs", "Device to host"},
    {C::kDeviceToDevice, "deviceToDeviceDurationUs", "Device to device"},
    {C::kIdle, "idleDurationUs", "Idle"},
    {C::kKernelLaunch, "kernelLaunchDurationUs", "Kernel launch"},
    {C::kHostCompute, "hostComputeDurationUs", "Host compute"},
    {C::kCompilation, "compilationDurationUs", "Compilation"},
}};

constexpr std::array<StepCategory, 2> kDeviceCompute = {C::kHighFlopsCompute, C::kLowFlopsCompute};
constexpr std::array<StepCategory, 4> kCollective = {C::kAllReduceCompute, C::kAllReduceSync, C::kSend, C::kRecvDone};
constexpr std::array<StepCategory, 1> kDeviceToDevice = {C::kDeviceToDevice};
constexpr std::array<StepCategory, 2> kInput = {C::kHostInfeed, C::kHostToDevice};
constexpr std::array<StepCategory, 2> kOutput = {C::kHostOutfeed, C::kDeviceToHost};
constexpr std::array<StepCategory, 1> kOthers = {C::kIdle};
constexpr std::array<StepCategory, 1> kKernelLaunch = {C::kKernelLaunch};
constexpr std::array<StepCategory, 1> kHostCompute = {C::kHostCompute};
constexpr std::array<StepCategory, 1> kCompilation = {C::kCompilation};

const std::array<GenericCategory, 9> kGeneric = {{
    {"deviceComputeUs", "Device compute", kDeviceCompute},
    {"deviceCollectiveCommunicationUs", "Device collective communication", kCollective},
    {"kernelLaunchUs", "Kernel launch", kKernelLaunch},
    {"hostComputeUs", "Host compute", kHostCompute},
    {"deviceToDeviceUs", "Device to device", kDeviceToDevice},
    {"compilationUs", "Compilation", kCompilation},
    {"inputUs", "Input", kInput},
    {"outputUs", "Output", kOutput},
    {"allOthersUs", "All others", kOthers},
}};

}  // namespace

std::span<const StepCategoryInfo> all_step_categories() { return kCategories; }

const StepCategoryInfo& step_category_info(StepCategory category) {
  return kCategories[static_cast<size_t>(category) - 1];
}

StepCategory largest_category(const CategoryDurations& durations) {
  int best = 1;
  for (int id = 2; id <= kMaxStepCategoryId; ++id) {
    if (durations[id] > durations[best]) best = id;
  }
  return static_cast<StepCategory>(best);
}

std::span<const GenericCategory> generic_gpu_categories() { return kGeneric; }

}  // namespace podscope::analysis
