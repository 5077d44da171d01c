// The tf.data bottleneck analysis on in-memory planes (nested synchronous iterators, an async Prefetch with its
// Produce/Consume links, a tree too deep and too wide for the walk's bounds, annotated input stages, none at
// all) and on the real TensorFlow file from ../shared/testdata.
#include "analysis/tools/tf_data_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/proto/xspace/xspace_contents.h"
#include "tests/shared_testdata.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::CombinedTfDataStats;
using tensorflow::profiler::InputPipelineStats;
using tensorflow::profiler::TfDataStats;
using tensorflow::profiler::XPlane;
using xspace::XPlaneBuilder;

constexpr int64_t kUs = 1'000;
constexpr int64_t kPsPerUs = 1'000'000;
constexpr int64_t kT0 = 1'700'000'000'000'000'000;  // Unix ns

XPlane host_plane() {
  XPlane plane;
  plane.set_name(std::string(xspace::kHostPlaneName));
  return plane;
}

const InputPipelineStats& only_pipeline(const TfDataStats& stats) {
  EXPECT_EQ(stats.input_pipelines_size(), 1);
  return stats.input_pipelines().begin()->second;
}

// Iterator::Batch (id 1) > Batch::Map (id 2) > Batch::Map::TFRecord (id 3), called three times for 100, 40 and
// 60 us; in the slowest call Map runs 80 us around a 10 us read: self times 20, 70, 10 us.
XPlane nested_sync_pipeline() {
  XPlane plane = host_plane();
  XPlaneBuilder b(&plane);
  auto line = b.line_named("tf_data_iterator_get_next");
  auto call = [&](int64_t start, int64_t batch_us, int64_t map_us, int64_t read_us) {
    line.add_event("Iterator::Batch", start, batch_us * kUs).add("id", int64_t{1});
    line.add_event("Iterator::Batch::Map", start + 10 * kUs, map_us * kUs)
        .add("id", int64_t{2})
        .add("parent_id", int64_t{1});
    line.add_event("Iterator::Batch::Map::TFRecord", start + 20 * kUs, read_us * kUs)
        .add("id", int64_t{3})
        .add("parent_id", int64_t{2});
    line.add_event("unrelated_op", start + 1 * kUs, 2 * kUs);
  };
  call(kT0, 100, 80, 10);
  call(kT0 + 1000 * kUs, 40, 20, 5);
  call(kT0 + 2000 * kUs, 60, 30, 5);
  return plane;
}

TEST(TfDataStats, NestedSyncIteratorsNameTheBlockingIteratorWithTheLargestSelfTime) {
  const PlaneTfDataStats result = xplane_to_tf_data_stats(nested_sync_pipeline());
  const InputPipelineStats& pipeline = only_pipeline(result.stats);
  EXPECT_EQ(pipeline.metadata().name(), "Host:0");
  EXPECT_EQ(pipeline.metadata().id(), 1);
  EXPECT_EQ(pipeline.num_calls(), 3);
  EXPECT_EQ(pipeline.max_latency_ps(), 100 * kPsPerUs);
  EXPECT_EQ(pipeline.min_latency_ps(), 40 * kPsPerUs);
  EXPECT_EQ(pipeline.avg_latency_ps(), (200 * kPsPerUs) / 3);
  EXPECT_EQ(pipeline.num_slow_calls(), 2);  // 100 and 60 us
  ASSERT_EQ(pipeline.stats_size(), 3);      // slowest first
  const auto& slowest = pipeline.stats(0);
  EXPECT_EQ(slowest.bottleneck_iterator_id(), 2);
  EXPECT_EQ(slowest.bottleneck_iterator_latency_ps(), 70 * kPsPerUs);
  EXPECT_EQ(slowest.iterator_stats().at(1).self_time_ps(), 20 * kPsPerUs);
  EXPECT_EQ(slowest.iterator_stats().at(3).self_time_ps(), 10 * kPsPerUs);
  for (const auto& [id, stat] : slowest.iterator_stats()) {
    EXPECT_TRUE(stat.is_blocking()) << id;
    EXPECT_EQ(stat.num_calls(), 1);
  }
  EXPECT_EQ(pipeline.stats(1).iterator_stats().at(1).duration_ps(), 60 * kPsPerUs);

  const auto& md = result.stats.iterator_metadata();
  EXPECT_EQ(md.at(2).name(), "Map");
  EXPECT_EQ(md.at(2).long_name(), "Iterator::Batch::Map");
  EXPECT_EQ(md.at(2).parent_id(), 1);
  EXPECT_FALSE(md.at(2).is_async());

  const CombinedTfDataStats combined = combine_tf_data_stats({{"worker-0", result}});
  EXPECT_TRUE(combined.is_input_bound());
  ASSERT_EQ(combined.bottleneck_analysis_size(), 1);
  const auto& b = combined.bottleneck_analysis(0);
  EXPECT_EQ(b.host(), "worker-0");
  EXPECT_EQ(b.input_pipeline(), "Host:0");
  EXPECT_EQ(b.iterator_name(), "Map");
  EXPECT_EQ(b.iterator_latency_ps(), 70 * kPsPerUs);
  EXPECT_NE(b.suggestion().find("num_parallel_calls"), std::string::npos) << b.suggestion();
  const std::string text = tf_data_stats_to_text(combined);
  EXPECT_NE(text.find("host worker-0"), std::string::npos) << text;
  EXPECT_NE(text.find("pipeline Host:0: calls 3"), std::string::npos) << text;
  EXPECT_NE(text.find("slow calls (> 50 us) 2"), std::string::npos) << text;
  EXPECT_NE(text.find("Map (Iterator::Batch::Map)"), std::string::npos) << text;
}

// Iterator::Prefetch (id 10) on the consumer's line; its producer, Iterator::Prefetch::Map (id 11), runs on a
// background line inside PrefetchProduce. Call A (100 us) waits for element 1, whose producer overlaps it for
// 85 us; call B (10 us) takes element 2, produced before it was asked for.
TEST(TfDataStats, AsyncPrefetchBlocksOnlyWhereItsProducerOverlapsTheCall) {
  XPlane plane = host_plane();
  XPlaneBuilder b(&plane);
  auto consumer = b.line_named("tf_data_iterator_get_next");
  auto producer = b.line_named("tf_data_prefetch_thread");
  consumer.add_event("Iterator::Prefetch", kT0 + 1000 * kUs, 100 * kUs).add("id", int64_t{10});
  consumer.add_event("PrefetchConsume", kT0 + 1095 * kUs, 2 * kUs).add("element_id", int64_t{1});
  producer.add_event("PrefetchProduce", kT0 + 1010 * kUs, 85 * kUs).add("element_id", int64_t{1});
  producer.add_event("Iterator::Prefetch::Map", kT0 + 1010 * kUs, 85 * kUs)
      .add("id", int64_t{11})
      .add("parent_id", int64_t{10});
  consumer.add_event("Iterator::Prefetch", kT0 + 2000 * kUs, 10 * kUs).add("id", int64_t{10});
  consumer.add_event("PrefetchConsume", kT0 + 2005 * kUs, 2 * kUs).add("element_id", int64_t{2});
  producer.add_event("PrefetchProduce", kT0 + 1500 * kUs, 100 * kUs).add("element_id", int64_t{2});
  producer.add_event("Iterator::Prefetch::Map", kT0 + 1500 * kUs, 100 * kUs)
      .add("id", int64_t{11})
      .add("parent_id", int64_t{10});

  const PlaneTfDataStats result = xplane_to_tf_data_stats(plane);
  const InputPipelineStats& pipeline = only_pipeline(result.stats);
  EXPECT_TRUE(result.stats.iterator_metadata().at(10).is_async());
  ASSERT_EQ(pipeline.stats_size(), 2);
  const auto& a = pipeline.stats(0);
  EXPECT_EQ(a.bottleneck_iterator_id(), 11);
  EXPECT_EQ(a.iterator_stats().at(11).self_time_ps(), 85 * kPsPerUs);
  EXPECT_TRUE(a.iterator_stats().at(11).is_blocking());
  EXPECT_EQ(a.iterator_stats().at(10).self_time_ps(), 15 * kPsPerUs);
  const auto& call_b = pipeline.stats(1);
  EXPECT_EQ(call_b.bottleneck_iterator_id(), 10);
  EXPECT_EQ(call_b.bottleneck_iterator_latency_ps(), 10 * kPsPerUs);
  ASSERT_TRUE(call_b.iterator_stats().contains(11));  // walked, but not on the synchronous path
  EXPECT_FALSE(call_b.iterator_stats().at(11).is_blocking());
  EXPECT_EQ(call_b.iterator_stats().at(10).self_time_ps(), 10 * kPsPerUs);
}

TEST(TfDataStats, TreeDeeperThanTheBoundStopsThereAndIsCounted) {
  XPlane plane = host_plane();
  XPlaneBuilder b(&plane);
  auto line = b.line_named("deep");
  constexpr int kDepth = kMaxIteratorDepth + 50;
  std::string name = "Iterator::Root";
  for (int i = 0; i < kDepth; ++i) {
    auto stats = line.add_event(name, kT0 + i * kUs, (2 * kDepth - 2 * i) * kUs);
    stats.add("id", int64_t{i + 1});
    if (i > 0) stats.add("parent_id", int64_t{i});
    name += "::Map";
  }
  const PlaneTfDataStats result = xplane_to_tf_data_stats(plane);
  EXPECT_EQ(result.walk.depth_bound_hits, 1u);
  EXPECT_EQ(result.walk.call_bound_hits, 0u);
  const auto& call = only_pipeline(result.stats).stats(0);
  EXPECT_EQ(call.iterator_stats_size(), kMaxIteratorDepth + 1);
  const CombinedTfDataStats combined = combine_tf_data_stats({{"h", result}});
  EXPECT_NE(combined.summary().find("depth bound"), std::string::npos) << combined.summary();
}

// One Batch call over more element reads than the walk may visit.
TEST(TfDataStats, TreeWiderThanTheBoundStopsThereAndIsCounted) {
  XPlane plane = host_plane();
  XPlaneBuilder b(&plane);
  auto line = b.line_named("wide");
  constexpr int64_t kReads = kMaxIteratorCallsPerWalk + 500;
  line.add_event("Iterator::Batch", kT0, (kReads + 10) * kUs).add("id", int64_t{1});
  for (int64_t i = 0; i < kReads; ++i) {
    line.add_event("Iterator::Batch::TFRecord", kT0 + (i + 5) * kUs, kUs / 2)
        .add("id", int64_t{2})
        .add("parent_id", int64_t{1});
  }
  const PlaneTfDataStats result = xplane_to_tf_data_stats(plane);
  EXPECT_EQ(result.walk.call_bound_hits, 1u);
  EXPECT_EQ(result.walk.depth_bound_hits, 0u);
  const auto& call = only_pipeline(result.stats).stats(0);
  EXPECT_EQ(call.iterator_stats().at(2).num_calls(), kMaxIteratorCallsPerWalk - 1);
  const CombinedTfDataStats combined = combine_tf_data_stats({{"h", result}});
  EXPECT_NE(combined.summary().find("bound of 10000 iterator calls in 1 calls"), std::string::npos)
      << combined.summary();
}

// Element ids that repeat (a new iterator per epoch): each consuming call is linked to the producer of its
// element that last started before it ended.
TEST(TfDataStats, RepeatedElementIdsLinkTheLatestProducerBeforeTheCall) {
  XPlane plane = host_plane();
  XPlaneBuilder b(&plane);
  auto consumer = b.line_named("consumer");
  auto producer = b.line_named("producer");
  for (int epoch = 0; epoch < 3; ++epoch) {
    const int64_t start = kT0 + epoch * 1000 * kUs;
    consumer.add_event("Iterator::Prefetch", start + 100 * kUs, (50 + 10 * epoch) * kUs).add("id", int64_t{1});
    consumer.add_event("PrefetchConsume", start + 140 * kUs, kUs).add("element_id", int64_t{0});
    producer.add_event("PrefetchProduce", start + 110 * kUs, (20 + 10 * epoch) * kUs).add("element_id", int64_t{0});
    producer.add_event("Iterator::Prefetch::Map", start + 110 * kUs, (20 + 10 * epoch) * kUs)
        .add("id", int64_t{2})
        .add("parent_id", int64_t{1});
  }
  const PlaneTfDataStats result = xplane_to_tf_data_stats(plane);
  const InputPipelineStats& pipeline = only_pipeline(result.stats);
  ASSERT_EQ(pipeline.stats_size(), 3);
  for (int i = 0; i < 3; ++i) {
    const int epoch = 2 - i;  // slowest first
    const auto& map = pipeline.stats(i).iterator_stats().at(2);
    EXPECT_EQ(map.num_calls(), 1) << "epoch " << epoch;
    EXPECT_EQ(map.duration_ps(), (20 + 10 * epoch) * kPsPerUs) << "epoch " << epoch;
  }
}

// A DataLoader-style pipeline on core 3: `batch` (root, enqueue) waits on `read` (70 us) and `decode` (20 us)
// in each of its calls; one read ran ahead of any batch call and blocks nothing.
XPlane stage_plane(int64_t core, int64_t read_us) {
  XPlane plane;
  plane.set_name(std::string(xspace::kCustomPlanePrefix) + std::to_string(core));
  plane.set_id(core);
  XPlaneBuilder b(&plane);
  auto line = b.line_named(xspace::kInputPipelineLineName);
  auto stage = [&](std::string_view name, std::string_view category, int64_t id, int64_t parent, int64_t start,
                   int64_t us) {
    line.add_event(name, start, us * kUs)
        .add(xspace::kInputStageCategoryStat, category)
        .add(xspace::kInputStageIdStat, id)
        .add(xspace::kInputStageParentIdStat, parent);
  };
  stage("read", "read", 2, 1, kT0, 30);  // ahead of the first batch
  for (int i = 0; i < 2; ++i) {
    const int64_t start = kT0 + (100 + 200 * i) * kUs;
    stage("batch", "enqueue", 1, 0, start, read_us + 30);
    stage("read", "read", 2, 1, start + 5 * kUs, read_us);
    stage("decode", "preprocess", 3, 1, start + (5 + read_us) * kUs, 20);
  }
  return plane;
}

TEST(TfDataStats, InputStagesFormTheTreeByTheirParentLinks) {
  const PlaneTfDataStats result = input_stages_to_tf_data_stats(stage_plane(3, 70));
  const InputPipelineStats& pipeline = only_pipeline(result.stats);
  EXPECT_EQ(pipeline.metadata().name(), "batch (core 3)");
  EXPECT_EQ(pipeline.num_calls(), 2);
  EXPECT_EQ(pipeline.max_latency_ps(), 100 * kPsPerUs);
  const auto& slowest = pipeline.stats(0);
  EXPECT_EQ(slowest.bottleneck_iterator_id(), 2);
  EXPECT_EQ(slowest.iterator_stats().at(2).num_calls(), 1);  // the read ahead of it is no child of it
  EXPECT_EQ(slowest.iterator_stats().at(2).self_time_ps(), 70 * kPsPerUs);
  EXPECT_EQ(slowest.iterator_stats().at(1).self_time_ps(), 10 * kPsPerUs);
  const auto& md = result.stats.iterator_metadata();
  EXPECT_EQ(md.at(2).long_name(), "batch::read");
  EXPECT_EQ(md.at(3).params().at("category"), "preprocess");

  const CombinedTfDataStats combined = combine_tf_data_stats({{"worker-1", result}});
  ASSERT_EQ(combined.bottleneck_analysis_size(), 1);
  EXPECT_EQ(combined.bottleneck_analysis(0).iterator_name(), "read");
  EXPECT_NE(combined.bottleneck_analysis(0).suggestion().find("Read in parallel"), std::string::npos);
}

// The client library gives every stage call a fresh id: a batch per step is still one pipeline, its stages one
// iterator each, and each call's children exactly the calls nested in it by their parent id.
TEST(TfDataStats, FreshIdsPerCallFormOnePipelinePerRootStageName) {
  XPlane plane;
  plane.set_name(std::string(xspace::kCustomPlanePrefix) + "2");
  plane.set_id(2);
  XPlaneBuilder b(&plane);
  auto line = b.line_named(xspace::kInputPipelineLineName);
  constexpr int kBatches = 3000;
  int64_t next_id = 1;
  for (int i = 0; i < kBatches; ++i) {
    const int64_t start = kT0 + i * 100 * kUs;
    const int64_t batch = next_id++, read = next_id++;
    const int64_t read_us = i == 1234 ? 80 : 20;
    line.add_event("input_batch", start, (read_us + 10) * kUs)
        .add(xspace::kInputStageCategoryStat, "enqueue")
        .add(xspace::kInputStageIdStat, batch)
        .add(xspace::kInputStageParentIdStat, int64_t{0});
    line.add_event("read_batch", start + 5 * kUs, read_us * kUs)
        .add(xspace::kInputStageCategoryStat, "read")
        .add(xspace::kInputStageIdStat, read)
        .add(xspace::kInputStageParentIdStat, batch);
  }
  const PlaneTfDataStats result = input_stages_to_tf_data_stats(plane);
  const InputPipelineStats& pipeline = only_pipeline(result.stats);
  EXPECT_EQ(pipeline.metadata().name(), "input_batch (core 2)");
  EXPECT_EQ(pipeline.num_calls(), kBatches);
  EXPECT_EQ(pipeline.max_latency_ps(), 90 * kPsPerUs);
  EXPECT_EQ(static_cast<size_t>(pipeline.stats_size()), kSlowestTfDataCallsKept);
  ASSERT_EQ(result.stats.iterator_metadata_size(), 2);
  const auto& slowest = pipeline.stats(0);
  const int64_t read_stage = slowest.bottleneck_iterator_id();
  EXPECT_EQ(result.stats.iterator_metadata().at(read_stage).long_name(), "input_batch::read_batch");
  EXPECT_EQ(slowest.iterator_stats().at(read_stage).num_calls(), 1);
  EXPECT_EQ(slowest.iterator_stats().at(read_stage).self_time_ps(), 80 * kPsPerUs);
  EXPECT_EQ(tf_data_stats_to_text(combine_tf_data_stats({{"h", result}})).find("#2"), std::string::npos);
}

// Parent links that loop end the walk up: the stage they reach is a root.
TEST(TfDataStats, StageParentLinksThatLoopEndAtARoot) {
  XPlane plane;
  plane.set_name(std::string(xspace::kCustomPlanePrefix) + "0");
  XPlaneBuilder b(&plane);
  auto line = b.line_named(xspace::kInputPipelineLineName);
  line.add_event("a", kT0, 10 * kUs)
      .add(xspace::kInputStageIdStat, int64_t{5})
      .add(xspace::kInputStageParentIdStat, int64_t{6});
  line.add_event("b", kT0, 20 * kUs)
      .add(xspace::kInputStageIdStat, int64_t{6})
      .add(xspace::kInputStageParentIdStat, int64_t{5});
  const PlaneTfDataStats result = input_stages_to_tf_data_stats(plane);
  EXPECT_EQ(result.stats.input_pipelines_size(), 1);
  EXPECT_EQ(result.stats.iterator_metadata_size(), 2);
}

TEST(TfDataStats, PipelinesOfOneHostWithCollidingIdsAreKeptApart) {
  const CombinedTfDataStats combined =
      combine_tf_data_stats({{"worker-1", input_stages_to_tf_data_stats(stage_plane(0, 70))},
                             {"worker-1", input_stages_to_tf_data_stats(stage_plane(1, 150))}});
  ASSERT_EQ(combined.tf_data_stats_size(), 1);
  const TfDataStats& host = combined.tf_data_stats().at("worker-1");
  EXPECT_EQ(host.input_pipelines_size(), 2);
  EXPECT_EQ(host.iterator_metadata_size(), 6);
  for (const auto& [root_id, pipeline] : host.input_pipelines()) {
    EXPECT_EQ(pipeline.metadata().id(), root_id);
    for (const auto& [id, stat] : pipeline.stats(0).iterator_stats()) {
      EXPECT_EQ(stat.id(), id);
      const auto& md = host.iterator_metadata().at(id);
      EXPECT_TRUE(md.parent_id() == 0 ? id == root_id : host.iterator_metadata().contains(md.parent_id()));
    }
  }
  ASSERT_EQ(combined.bottleneck_analysis_size(), 2);
  EXPECT_EQ(combined.bottleneck_analysis(0).input_pipeline(), "batch (core 1)");  // slowest first
  EXPECT_EQ(combined.bottleneck_analysis(0).iterator_latency_ps(), 150 * kPsPerUs);
  EXPECT_EQ(combined.bottleneck_analysis(1).input_pipeline(), "batch (core 0)");
}

TEST(TfDataStats, NoIteratorEventsSayNoTfDataActivityCaptured) {
  XPlane plane = host_plane();
  XPlaneBuilder b(&plane);
  b.line_named("python3").add_event("train", kT0, 10 * kUs).add(xspace::kStepNumStat, int64_t{1});
  EXPECT_FALSE(names_tf_data_iterators(plane));
  const PlaneTfDataStats result = xplane_to_tf_data_stats(plane);
  EXPECT_EQ(result.stats.input_pipelines_size(), 0);
  const CombinedTfDataStats combined =
      combine_tf_data_stats({{"h", result}, {"h", input_stages_to_tf_data_stats(plane)}});
  EXPECT_FALSE(combined.is_input_bound());
  EXPECT_EQ(combined.bottleneck_analysis_size(), 0);
  EXPECT_EQ(combined.tf_data_stats_size(), 0);
  EXPECT_TRUE(combined.summary().starts_with("no tf.data activity captured")) << combined.summary();
  EXPECT_NE(tf_data_stats_to_text(combined).find("no tf.data activity captured"), std::string::npos);
}

// The real file: two Iterator::Prefetch pipelines (one per distributed dataset), one call each, whose
// Generator source, produced on another thread inside PrefetchProduce, blocks the call.
TEST(TfDataStats, TensorFlowFileFindsThePrefetchPipelinesAndTheirGeneratorBottleneck) {
  const auto tf_file = podscope::testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!tf_file) return;
  const tensorflow::profiler::XSpace space = podscope::testing::read_xspace_file(*tf_file);
  const XPlane* host = xspace::find_plane(space, xspace::kHostPlaneName);
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(names_tf_data_iterators(*host));
  const PlaneTfDataStats result = xplane_to_tf_data_stats(*host);
  EXPECT_EQ(result.walk.depth_bound_hits + result.walk.call_bound_hits, 0u);
  ASSERT_EQ(result.stats.input_pipelines_size(), 2);
  std::map<int64_t, int64_t> generator_self_by_latency;
  for (const auto& [root_id, pipeline] : result.stats.input_pipelines()) {
    EXPECT_EQ(result.stats.iterator_metadata().at(root_id).long_name(), "Iterator::Prefetch");
    EXPECT_EQ(pipeline.num_calls(), 1);
    EXPECT_EQ(pipeline.num_slow_calls(), 1);
    EXPECT_EQ(pipeline.min_latency_ps(), pipeline.max_latency_ps());
    ASSERT_EQ(pipeline.stats_size(), 1);
    const auto& call = pipeline.stats(0);
    const auto& bottleneck = result.stats.iterator_metadata().at(call.bottleneck_iterator_id());
    EXPECT_EQ(bottleneck.long_name(), "Iterator::Prefetch::Generator");
    EXPECT_EQ(bottleneck.parent_id(), root_id);
    EXPECT_EQ(call.iterator_stats().at(root_id).self_time_ps() + call.bottleneck_iterator_latency_ps(),
              pipeline.max_latency_ps());
    generator_self_by_latency[pipeline.max_latency_ps()] = call.bottleneck_iterator_latency_ps();
  }
  // Iterator::Prefetch and Iterator::Prefetch::Generator durations as recorded in the file.
  EXPECT_EQ(generator_self_by_latency,
            (std::map<int64_t, int64_t>{{6'524'644'000, 6'251'032'000}, {7'077'234'000, 6'726'044'000}}));

  const CombinedTfDataStats combined = combine_tf_data_stats({{"host0", result}});
  EXPECT_TRUE(combined.is_input_bound());
  ASSERT_EQ(combined.bottleneck_analysis_size(), 2);
  for (const auto& b : combined.bottleneck_analysis()) {
    EXPECT_EQ(b.iterator_name(), "Generator");
    EXPECT_TRUE(std::isfinite(static_cast<double>(b.iterator_latency_ps())));
    EXPECT_NE(b.suggestion().find("Read this source in parallel"), std::string::npos);
  }
  EXPECT_EQ(combined.bottleneck_analysis(0).max_latency_ps(), 7'077'234'000);
  const std::string text = tf_data_stats_to_text(combined);
  EXPECT_NE(text.find("Generator (Iterator::Prefetch::Generator)"), std::string::npos) << text;
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_EQ(text.find("inf"), std::string::npos) << text;
}

}  // namespace
}  // namespace podscope::analysis
