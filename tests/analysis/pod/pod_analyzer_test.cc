// The pod analysis on synthetic ring-all-reduce pods with a known truth: stragglers and their sync,
// infeed-bound steps, clock merging of channels, unpaired endpoints, edge trimming, matching without ids, per-step
// records bounded.
#include "analysis/pod/pod_analyzer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "analysis/rendering/renderers.h"
#include "analysis/pod/step_category.h"
#include "analysis/steps/step_sampling.h"
#include "proto/xspace/names.h"
#include "tests/analysis/step_databases.h"
#include "tests/analysis/synthetic_pod.h"

namespace podscope::analysis {
namespace {

using testing::make_synthetic_pod;
using testing::pod_analysis;
using testing::SyntheticPodSpec;

podscope::v1::PodAnalysis analyze(const SyntheticPodSpec& spec, int drop_last_ranks = 0) {
  const auto spaces = make_synthetic_pod(spec);
  std::vector<const tensorflow::profiler::XSpace*> pointers;
  for (size_t i = 0; i + drop_last_ranks < spaces.size(); ++i) pointers.push_back(&spaces[i]);
  return pod_analysis(pointers);
}

double us(const podscope::v1::PodStatsRecord& r, StepCategory c) {
  const auto it = r.step_breakdown_us().find(static_cast<int>(c));
  return it == r.step_breakdown_us().end() ? -1.0 : it->second;
}

TEST(PodAnalyzerTest, StragglerHoldsOthersInAllReduceSync) {
  SyntheticPodSpec spec;
  spec.straggler_rank = 2;
  spec.straggler_delay_ns = 20'000'000;
  const auto analysis = analyze(spec);
  const auto& seq = analysis.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(seq.pod_stats_map_size(), spec.steps);
  for (const auto& step : seq.pod_stats_map()) {
    ASSERT_EQ(step.pod_stats_per_core_size(), 4);
    for (const auto& [core, r] : step.pod_stats_per_core()) {
      double sum = 0;
      for (const auto& [id, v] : r.step_breakdown_us()) sum += v;
      EXPECT_NEAR(sum, r.total_duration_us(), 1e-6) << "core " << core;
      EXPECT_EQ(r.step_breakdown_us_size(), kMaxStepCategoryId);
      const double compute = us(r, StepCategory::kHighFlopsCompute) + us(r, StepCategory::kLowFlopsCompute);
      if (core == 2) {
        EXPECT_NEAR(us(r, StepCategory::kAllReduceSync), 0, 1);
        EXPECT_NEAR(compute, 50'000, 1);
      } else {
        EXPECT_NEAR(us(r, StepCategory::kAllReduceSync), 20'000, 1) << "core " << core;
        EXPECT_NEAR(compute, 30'000, 1);
      }
      EXPECT_NEAR(us(r, StepCategory::kAllReduceCompute), 5'000, 1);
      // Ring chunks inside the all-reduce count toward it, not toward send/recv-done.
      EXPECT_EQ(us(r, StepCategory::kSend), 0);
      EXPECT_EQ(us(r, StepCategory::kRecvDone), 0);
    }
    ASSERT_EQ(step.all_reduce_op_db_size(), 1);
    EXPECT_EQ(step.all_reduce_op_db(0).name(), "all-reduce");
    EXPECT_EQ(step.all_reduce_op_db(0).occurrences(), 4u);
    EXPECT_EQ(step.all_reduce_op_db(0).data_size(), 2u << 20);
    ASSERT_EQ(step.all_reduce_op_db(0).replica_groups_size(), 1);
    EXPECT_EQ(step.all_reduce_op_db(0).replica_groups(0).replica_ids_size(), 4);
  }
  ASSERT_EQ(analysis.stragglers_size(), 1);
  EXPECT_EQ(analysis.stragglers(0).core_id(), 2u);
  EXPECT_EQ(analysis.stragglers(0).reason(), "compute");
  EXPECT_EQ(analysis.stragglers(0).straggling_steps(), static_cast<uint32_t>(spec.steps));
  EXPECT_NEAR(analysis.stragglers(0).mean_excess_us(), 20'000, 1);
  EXPECT_NEAR(analysis.stragglers(0).mean_cost_to_others_us(), 3 * 20'000, 3);
  EXPECT_GT(analysis.all_reduce_sync_share(), 0.2);
}

// A fast trainer's thousands of steps: the per-step records show kMaxStepsShown of them, the slowest among them,
// while the averages, stragglers and counts take every step.
TEST(PodAnalyzerTest, PerStepRecordsAreBoundedWhileFiguresCountEveryStep) {
  SyntheticPodSpec spec;
  spec.steps = 3 * static_cast<int>(kMaxStepsShown);
  spec.compute_ns = 1'000'000;
  spec.all_reduce_compute_ns = 100'000;
  spec.gap_ns = 10'000;
  spec.straggler_rank = 2;
  spec.straggler_delay_ns = 500'000;
  const auto analysis = analyze(spec);
  EXPECT_EQ(analysis.counts().steps(), static_cast<uint32_t>(spec.steps));
  EXPECT_EQ(analysis.counts().steps_shown(), static_cast<uint32_t>(kMaxStepsShown));
  EXPECT_EQ(analysis.pod_viewer().pod_stats_sequence().pod_stats_map_size(), static_cast<int>(kMaxStepsShown));
  for (const auto& core : analysis.cores()) EXPECT_EQ(core.step_count(), static_cast<uint32_t>(spec.steps));
  ASSERT_EQ(analysis.stragglers_size(), 1);
  EXPECT_EQ(analysis.stragglers(0).straggling_steps(), static_cast<uint32_t>(spec.steps));
  // Shown in step order, first and last step included.
  const auto& maps = analysis.pod_viewer().pod_stats_sequence().pod_stats_map();
  for (int i = 1; i < maps.size(); ++i) EXPECT_LT(maps[i - 1].step_num(), maps[i].step_num());
  const std::string summary = render_summary_text(analysis);
  EXPECT_NE(summary.find(absl::StrCat(spec.steps, " steps")), std::string::npos) << summary;
  EXPECT_NE(summary.find(absl::StrCat("show ", kMaxStepsShown, " of the ", spec.steps, " steps")), std::string::npos)
      << summary;
}

TEST(StepSamplingTest, ShowsTheSlowestAndSpacesTheRest) {
  std::vector<int64_t> ns(1000, 10);
  ns[123] = 500;
  ns[777] = 400;
  const std::vector<bool> shown = steps_shown(ns, {456}, 10);
  EXPECT_EQ(std::count(shown.begin(), shown.end(), true), 10);
  EXPECT_TRUE(shown[123]);
  EXPECT_TRUE(shown[777]);
  EXPECT_TRUE(shown[456]);
  EXPECT_TRUE(shown[0]);
  EXPECT_EQ(steps_shown(std::vector<int64_t>(7, 1), {}, 10), std::vector<bool>(7, true));
}

TEST(PodAnalyzerTest, BalancedPodHasNoStraggler) {
  const auto analysis = analyze(SyntheticPodSpec{});
  EXPECT_EQ(analysis.stragglers_size(), 0);
  for (const auto& core : analysis.cores()) EXPECT_EQ(core.bottleneck(), "High flops compute");
}

// The straggler is the core the others wait for, whatever the pod's size: two cores have no median to stand out from,
// and the wait it causes names it as well as in a pod of many.
TEST(PodAnalyzerTest, StragglerIsTheCoreTheOthersWaitForInPodsOfAnySize) {
  for (const int ranks : {2, 3, 4, 16}) {
    SyntheticPodSpec spec;
    spec.ranks = ranks;
    spec.straggler_rank = ranks - 1;
    spec.straggler_delay_ns = 20'000'000;
    const auto analysis = analyze(spec);
    ASSERT_EQ(analysis.stragglers_size(), 1) << ranks << " ranks\n" << render_summary_text(analysis);
    const auto& s = analysis.stragglers(0);
    EXPECT_EQ(s.core_id(), static_cast<uint32_t>(ranks - 1)) << ranks;
    EXPECT_EQ(s.straggling_steps(), static_cast<uint32_t>(spec.steps)) << ranks;
    EXPECT_EQ(s.compared_steps(), static_cast<uint32_t>(spec.steps)) << ranks;
    EXPECT_NEAR(s.mean_excess_us(), 20'000, 1) << ranks;
    EXPECT_NEAR(s.mean_cost_to_others_us(), (ranks - 1) * 20'000.0, ranks) << ranks;
    EXPECT_EQ(s.waiting_cores(), static_cast<uint32_t>(ranks - 1)) << ranks;
    EXPECT_EQ(s.reason(), "compute") << ranks;
    EXPECT_NEAR(s.reason_excess_us(), 20'000, 1) << ranks;
    const std::string summary = render_summary_text(analysis);
    EXPECT_NE(summary.find(absl::StrCat("straggler: core ", ranks - 1, " (host", ranks - 1,
                                        "): the others waited for it in 5 of 5 steps, 20.000 ms per step")),
              std::string::npos)
        << summary;
  }
}

// GPU ranks whose collectives carry no id (matched by name and order within the step, as NCCL kernels are): the one
// the other waits for is found as on annotated cores.
TEST(PodAnalyzerTest, StragglerAmongTwoGpuRanksWithoutCollectiveIds) {
  SyntheticPodSpec spec;
  spec.ranks = 2;
  spec.gpu_plane = true;
  spec.all_reduce_ids = false;
  spec.straggler_rank = 0;
  spec.straggler_delay_ns = 5'000'000;
  const auto analysis = analyze(spec);
  ASSERT_EQ(analysis.stragglers_size(), 1) << render_summary_text(analysis);
  EXPECT_EQ(analysis.stragglers(0).core_id(), 0u);
  EXPECT_EQ(analysis.stragglers(0).straggling_steps(), static_cast<uint32_t>(spec.steps));
  EXPECT_NEAR(analysis.stragglers(0).mean_cost_to_others_us(), 5'000, 1);
  EXPECT_EQ(analysis.stragglers(0).reason(), "compute");
}

// A pod's step database written by hand: `cores` cores, one all-reduce per step whose duration on core c in step s
// is all_reduce_ns[s][c], after 30 ms of compute each.
std::vector<podscope::v1::HostStepDatabase> pod_with_all_reduces(
    const std::vector<std::vector<int64_t>>& all_reduce_ns) {
  std::vector<podscope::v1::HostStepDatabase> hosts;
  const size_t cores = all_reduce_ns.front().size();
  for (size_t c = 0; c < cores; ++c) {
    auto& host = hosts.emplace_back();
    host.set_host_name("host" + std::to_string(c));
    auto* core = host.add_cores();
    core->set_plane_id(static_cast<int64_t>(c));
    core->set_plane_name("/device:CUSTOM:" + std::to_string(c));
    core->set_kind(podscope::v1::CORE_KIND_CUSTOM);
    core->set_steps_found(static_cast<uint32_t>(all_reduce_ns.size()));
    int64_t start = 0;
    for (size_t s = 0; s < all_reduce_ns.size(); ++s) {
      const int64_t collective = all_reduce_ns[s][c];
      int64_t longest = 0;
      for (const int64_t ns : all_reduce_ns[s]) longest = std::max(longest, ns);
      auto* step = core->add_steps();
      step->set_step_num(static_cast<int64_t>(s));
      step->set_start_ns(start);
      const int64_t compute = 30'000'000 + longest - collective;
      step->set_end_ns(start + compute + collective);
      for (int k = 0; k < kOpKindCount; ++k) step->add_op_ns(0);
      step->set_op_ns(static_cast<int>(OpKind::kHighFlopsCompute), compute);
      step->set_op_ns(static_cast<int>(OpKind::kCollective), collective);
      auto* all_reduce = core->add_collectives();
      all_reduce->set_step_num(static_cast<int64_t>(s));
      all_reduce->set_match_key("id:" + std::to_string(s));
      all_reduce->set_name("all-reduce");
      all_reduce->set_duration_ns(collective);
      start = step->end_ns() + 1'000'000;
    }
  }
  return hosts;
}

TEST(PodAnalyzerTest, TwoCoresWhoseLastArrivalAlternatesByLittleHaveNoStraggler) {
  std::vector<std::vector<int64_t>> all_reduce_ns;
  for (int s = 0; s < 10; ++s) {
    all_reduce_ns.push_back(s % 2 == 0 ? std::vector<int64_t>{2'000'000, 1'000'000}
                                       : std::vector<int64_t>{1'000'000, 2'000'000});
  }
  const auto hosts = pod_with_all_reduces(all_reduce_ns);
  const auto analysis = analyze_pod_steps(merge_step_databases(hosts));
  EXPECT_EQ(analysis.stragglers_size(), 0) << render_summary_text(analysis);
}

TEST(PodAnalyzerTest, TwoCoresOneOfWhichTheOtherWaitsForInMostSteps) {
  std::vector<std::vector<int64_t>> all_reduce_ns;
  for (int s = 0; s < 10; ++s) {
    // Core 0 waits 8 ms for core 1 in 7 of 10 steps; the others are even.
    all_reduce_ns.push_back(s < 7 ? std::vector<int64_t>{9'000'000, 1'000'000}
                                  : std::vector<int64_t>{1'000'000, 1'000'000});
  }
  const auto hosts = pod_with_all_reduces(all_reduce_ns);
  const auto analysis = analyze_pod_steps(merge_step_databases(hosts));
  ASSERT_EQ(analysis.stragglers_size(), 1) << render_summary_text(analysis);
  const auto& s = analysis.stragglers(0);
  EXPECT_EQ(s.core_id(), 1u);
  EXPECT_EQ(s.straggling_steps(), 7u);
  EXPECT_EQ(s.compared_steps(), 10u);
  EXPECT_NEAR(s.mean_excess_us(), 8'000, 1e-6);
  EXPECT_NEAR(s.mean_cost_to_others_us(), 8'000, 1e-6);
  EXPECT_EQ(s.reason(), "compute");
  EXPECT_NEAR(s.reason_excess_us(), 8'000, 1e-6);
}

// A program without devices (TensorFlow on CPU) is its host: each host one core of the pod view, with the steps of
// its markers, its time the host's wait for input (Infeed) and its executor's work (host compute, not kernel
// launches: nothing launches kernels without a device).
TEST(PodAnalyzerTest, EachHostOfACpuProgramIsACore) {
  SyntheticPodSpec spec;
  spec.ranks = 2;
  spec.cpu_program = true;
  spec.input_delay_ns = 10'000'000;
  const auto analysis = analyze(spec);
  ASSERT_EQ(analysis.cores_size(), 2) << render_summary_text(analysis);
  EXPECT_EQ(analysis.counts().steps(), static_cast<uint32_t>(spec.steps));
  for (int i = 0; i < 2; ++i) {
    const auto& core = analysis.cores(i);
    EXPECT_EQ(core.core_id(), static_cast<uint32_t>(1000 * i));
    EXPECT_EQ(core.plane_name(), xspace::kHostPlaneName);
    EXPECT_EQ(core.step_count(), static_cast<uint32_t>(spec.steps));
    EXPECT_NEAR(core.average_step_us(), 40'000, 1);
    EXPECT_NEAR(core.average_breakdown_us().at(static_cast<int>(StepCategory::kHostInfeed)), 10'000, 1);
    EXPECT_NEAR(core.average_breakdown_us().at(static_cast<int>(StepCategory::kHostCompute)), 30'000, 1);
    EXPECT_EQ(core.average_breakdown_us().at(static_cast<int>(StepCategory::kKernelLaunch)), 0);
  }
  EXPECT_EQ(analysis.pod_viewer().device_type(), "CPU");
  EXPECT_EQ(analysis.stragglers_size(), 0) << "no collective: nobody waits for anybody";
}

TEST(PodAnalyzerTest, InputDelayMakesInfeedTheBottleneck) {
  SyntheticPodSpec spec;
  spec.input_delay_ns = 40'000'000;
  const auto analysis = analyze(spec);
  for (const auto& step : analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& [core, r] : step.pod_stats_per_core()) {
      EXPECT_EQ(r.bottleneck(), "Infeed");
      EXPECT_NEAR(us(r, StepCategory::kHostInfeed), 40'000, 1);
    }
  }
  for (const auto& core : analysis.cores()) EXPECT_EQ(core.bottleneck(), "Infeed");
}

TEST(PodAnalyzerTest, ChannelsOnMergedClocksMatchARunWithoutOffsets) {
  SyntheticPodSpec plain;
  SyntheticPodSpec skewed;
  skewed.clock_offsets_ns = {0, 5'000'000, -3'000'000, 1'000'000'000};
  const auto a = analyze(plain);
  const auto b = analyze(skewed);
  EXPECT_EQ(b.counts().negative_channel_durations(), 0u);
  const auto& sa = a.pod_viewer().pod_stats_sequence();
  const auto& sb = b.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(sa.pod_stats_map_size(), sb.pod_stats_map_size());
  for (int s = 0; s < sa.pod_stats_map_size(); ++s) {
    ASSERT_EQ(sa.pod_stats_map(s).channel_db_size(), 4);
    ASSERT_EQ(sb.pod_stats_map(s).channel_db_size(), 4);
    for (int c = 0; c < 4; ++c) {
      const auto& ca = sa.pod_stats_map(s).channel_db(c);
      const auto& cb = sb.pod_stats_map(s).channel_db(c);
      EXPECT_EQ(ca.channel_id(), cb.channel_id());
      EXPECT_GE(cb.duration_us(), 0);
      EXPECT_NEAR(ca.duration_us(), cb.duration_us(), 200);
      EXPECT_NEAR(cb.duration_us(), 50, 1e-6);
      EXPECT_EQ(cb.occurrences(), 2u);
      EXPECT_EQ(cb.data_size(), 1u << 20);
      EXPECT_EQ(cb.send_delay_us(), 0);
      ASSERT_EQ(cb.src_core_ids_size(), 1);
      ASSERT_EQ(cb.dst_core_ids_size(), 1);
      EXPECT_EQ(cb.dst_core_ids(0), (cb.src_core_ids(0) + 1) % 4);
      // 1 MiB in 50 us against a 12.5 GB/s link.
      EXPECT_NEAR(cb.utilization(), (1 << 20) / 50e-6 / 12.5e9, 1e-9);
      ASSERT_EQ(cb.hlo_names_size(), 2);
    }
  }
}

TEST(PodAnalyzerTest, UnmergedClocksAreReportedNotClamped) {
  SyntheticPodSpec spec;
  spec.clock_offsets_ns = {0, -1'000'000, 0, 0};
  spec.hide_clock_offsets = true;
  const auto analysis = analyze(spec);
  // Rank 1's clock is 1 ms behind: what rank 0 sends to it seems to arrive before it was sent.
  EXPECT_EQ(analysis.counts().negative_channel_durations(), static_cast<uint32_t>(spec.steps * spec.chunks));
  ASSERT_GT(analysis.pod_viewer().diagnostics().warnings_size(), 0);
  EXPECT_NE(analysis.pod_viewer().diagnostics().warnings(0).find("negative duration"), std::string::npos);
  bool saw_negative = false;
  for (const auto& step : analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& c : step.channel_db()) saw_negative |= c.duration_us() < 0;
  }
  EXPECT_TRUE(saw_negative);
}

TEST(PodAnalyzerTest, EndpointsWithoutPartnerAreDroppedAndCounted) {
  SyntheticPodSpec spec;
  const auto analysis = analyze(spec, /*drop_last_ranks=*/1);
  // Rank 2's sends to rank 3 and rank 0's recv-dones from rank 3 lost their partner.
  EXPECT_EQ(analysis.counts().unpaired_sends(), static_cast<uint32_t>(spec.steps * spec.chunks));
  EXPECT_EQ(analysis.counts().unpaired_recv_dones(), static_cast<uint32_t>(spec.steps * spec.chunks));
  for (const auto& step : analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    EXPECT_EQ(step.channel_db_size(), 2);
  }
}

TEST(PodAnalyzerTest, PartialStepsAtTheWindowEdgesAreTrimmed) {
  SyntheticPodSpec spec;
  spec.cut_edge_steps = true;
  spec.clock_offsets_ns = {0, 7'000'000, 0, -2'000'000};
  const auto analysis = analyze(spec);
  const auto& seq = analysis.pod_viewer().pod_stats_sequence();
  ASSERT_EQ(seq.pod_stats_map_size(), spec.steps - 2);
  EXPECT_EQ(seq.pod_stats_map(0).step_num(), 1u);
  EXPECT_EQ(analysis.counts().partial_steps_trimmed(), static_cast<uint32_t>(2 * spec.ranks));
}

TEST(PodAnalyzerTest, CollectivesWithoutIdsAreMatchedByOrder) {
  SyntheticPodSpec spec;
  spec.all_reduce_ids = false;
  spec.straggler_rank = 1;
  spec.straggler_delay_ns = 10'000'000;
  const auto analysis = analyze(spec);
  for (const auto& step : analysis.pod_viewer().pod_stats_sequence().pod_stats_map()) {
    for (const auto& [core, r] : step.pod_stats_per_core()) {
      EXPECT_NEAR(us(r, StepCategory::kAllReduceSync), core == 1 ? 0 : 10'000, 1) << "core " << core;
    }
  }
  ASSERT_EQ(analysis.stragglers_size(), 1);
  EXPECT_EQ(analysis.stragglers(0).core_id(), 1u);
}

TEST(PodAnalyzerTest, CoreIdentityComesFromPlaneIdAndHostPlane) {
  const auto analysis = analyze(SyntheticPodSpec{});
  ASSERT_EQ(analysis.cores_size(), 4);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(analysis.cores(i).core_id(), static_cast<uint32_t>(i));
    EXPECT_EQ(analysis.cores(i).host_name(), "host" + std::to_string(i));
    EXPECT_EQ(analysis.cores(i).step_count(), 5u);
  }
  const auto& first = analysis.pod_viewer().pod_stats_sequence().pod_stats_map(0);
  EXPECT_EQ(first.core_id_to_replica_id_map().at(3), 3u);
  EXPECT_EQ(analysis.pod_viewer().device_type(), "CUSTOM");
  EXPECT_EQ(analysis.pod_viewer().step_breakdown_events_size(), kMaxStepCategoryId);
}

TEST(PodAnalyzerTest, TopologyLaysOutOneRowOfCoresPerHost) {
  auto spaces = make_synthetic_pod(SyntheticPodSpec{});
  // The first host also holds rank 1's device plane: two cores there, one on each other host.
  for (const auto& plane : spaces[1].planes()) {
    if (plane.name() != xspace::kHostPlaneName) *spaces[0].add_planes() = plane;
  }
  const auto analysis = pod_analysis({&spaces[0], &spaces[2], &spaces[3]});
  const auto& topology = analysis.pod_viewer().topology();
  EXPECT_EQ(topology.x_dimension(), 2);
  EXPECT_EQ(topology.y_dimension(), 3);
  EXPECT_EQ(topology.host_x_stride(), 2);
  EXPECT_EQ(topology.host_y_stride(), 1);
  EXPECT_EQ(topology.num_cores_per_chip(), 1);
  struct Location {
    int x, y, index_on_host, global_id;
  };
  const std::vector<Location> expected = {{0, 0, 0, 0}, {1, 0, 1, 1}, {0, 1, 0, 2}, {0, 2, 0, 3}};
  ASSERT_EQ(topology.cores_size(), static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const auto& core = topology.cores(static_cast<int>(i));
    EXPECT_EQ(core.x(), expected[i].x) << i;
    EXPECT_EQ(core.y(), expected[i].y) << i;
    EXPECT_EQ(core.z(), 0) << i;
    EXPECT_EQ(core.host_x(), 0) << i;
    EXPECT_EQ(core.host_y(), expected[i].y) << i;
    EXPECT_EQ(core.index_on_host(), expected[i].index_on_host) << i;
    EXPECT_EQ(core.global_id(), expected[i].global_id) << i;
  }
}

}  // namespace
}  // namespace podscope::analysis
