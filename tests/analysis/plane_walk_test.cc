// One walk over a plane for every tool: each reader is handed the events of the lines it reads, in the plane's
// order, between its begin and end of each line; and the analysis that walks each plane once for all its tools
// gives every tool what the tool reading the planes on its own gives.
#include "analysis/plane_walk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/kernel_stats.h"
#include "analysis/input_pipeline.h"
#include "analysis/memory_profile.h"
#include "analysis/op_stats.h"
#include "analysis/renderers.h"
#include "analysis/runner/analysis_runner.h"
#include "analysis/step_model.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xspace_stream_reader.h"
#include "tests/analysis/synthetic_pod.h"
#include "tests/scratch_directory.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;

// Writes down what it is handed: "<line" at a line's start, the events' names, ">" at its end.
class RecordingReader final : public PlaneEventReader {
 public:
  explicit RecordingReader(std::vector<std::string> lines) : lines_(std::move(lines)) {}
  bool reads_line(const XLine& line) const override {
    return std::find(lines_.begin(), lines_.end(), line.name()) != lines_.end();
  }
  void begin_line(const XLine& line) override { seen.push_back("<" + line.name()); }
  void add_event(const xspace::XEventView& event) override { seen.emplace_back(event.name()); }
  void end_line(const XLine&) override { seen.emplace_back(">"); }

  std::vector<std::string> seen;

 private:
  std::vector<std::string> lines_;
};

TEST(PlaneWalk, EachReaderIsHandedTheEventsOfItsOwnLinesInThePlanesOrder) {
  XPlane plane;
  xspace::XPlaneBuilder builder(&plane);
  auto a = builder.line(1, "a");
  a.add_event("a1", 10, 1);
  a.add_event("a2", 20, 1);
  auto b = builder.line(2, "b");
  b.add_event("b1", 5, 1);
  builder.line(3, "c").add_event("c1", 1, 1);

  RecordingReader first({"a", "b"});
  RecordingReader second({"c", "b"});
  RecordingReader none({"d"});
  const xspace::XPlaneReader reader(plane);
  PlaneEventReader* readers[] = {&first, &second, &none};
  walk_plane(reader, readers);

  EXPECT_EQ(first.seen, (std::vector<std::string>{"<a", "a1", "a2", ">", "<b", "b1", ">"}));
  EXPECT_EQ(second.seen, (std::vector<std::string>{"<b", "b1", ">", "<c", "c1", ">"}));
  EXPECT_TRUE(none.seen.empty());
}

// The planes of `dir`'s files, each read by `consumer` in a walk of its own (the lines it wants only).
void read_alone(const std::filesystem::path& dir, PlaneConsumer& consumer, const xspace::XLineFilter& wants_line) {
  const std::vector<run_directory::RunFile> files = *run_directory::RunDirectory(dir).profile_files();
  for (size_t i = 0; i < files.size(); ++i) {
    ASSERT_TRUE(xspace::read_xspace_planes(
                    dir / files[i].name,
                    [&](const XPlane& plane) {
                      read_plane_alone(consumer, i, plane);
                      return absl::OkStatus();
                    },
                    nullptr, wants_line)
                    .ok());
  }
}

TEST(PlaneWalk, TheSharedWalkGivesEveryToolWhatItsOwnWalkGives) {
  testing::SyntheticPodSpec spec;
  spec.ranks = 4;
  spec.steps = 12;
  spec.compute_events_per_step = 3;
  spec.input_stages = true;
  podscope::testing::ScratchDirectory dir("plane-walk");
  for (int rank = 0; rank < spec.ranks; ++rank) {
    testing::SyntheticPodSpec rank_spec = spec;
    rank_spec.gpu_plane = rank % 2 == 1;
    rank_spec.tf_data_events = rank_spec.gpu_plane;
    rank_spec.tf_ops_and_memory = rank_spec.gpu_plane;
    std::ofstream out(dir.path() / ("host" + std::to_string(rank) + ".xplane.pb"), std::ios::binary);
    ASSERT_TRUE(testing::make_synthetic_rank(rank_spec, rank).SerializeToOstream(&out));
  }
  const absl::StatusOr<AnalysisOutcome> shared = analyze_run_files(dir.path());
  ASSERT_TRUE(shared.ok()) << shared.status();

  OpStatsBuilder op_stats;
  read_alone(dir.path(), op_stats, OpStatsBuilder::wants_line);
  EXPECT_EQ(serialize_deterministically(std::move(op_stats).finish().db),
            serialize_deterministically(shared->op_stats.db));

  MemoryProfileBuilder memory;
  read_alone(dir.path(), memory, MemoryProfileBuilder::wants_line);
  const MemoryProfileResult memory_alone = std::move(memory).finish();
  EXPECT_GT(memory_alone.events, 0u);
  EXPECT_EQ(serialize_deterministically(memory_alone.profile),
            serialize_deterministically(shared->memory_profile.profile));

  KernelStatsBuilder kernels;
  const std::vector<run_directory::RunFile> files = *run_directory::RunDirectory(dir.path()).profile_files();
  for (const auto& file : files) {
    ASSERT_TRUE(xspace::read_xspace_planes(
                    dir.path() / file.name,
                    [&](const XPlane& plane) {
                      kernels.add_plane(plane);
                      return absl::OkStatus();
                    },
                    nullptr, KernelStatsBuilder::wants_line)
                    .ok());
    kernels.end_file();
  }
  const KernelStatsResult kernels_alone = std::move(kernels).finish();
  EXPECT_GT(kernels_alone.db.reports_size(), 0);
  EXPECT_EQ(serialize_deterministically(kernels_alone.db), serialize_deterministically(shared->kernel_stats.db));

  StepModelBuilder steps;
  for (size_t i = 0; i < files.size(); ++i) {
    xspace::XSpaceHeader header;
    ASSERT_TRUE(xspace::read_xspace_planes(
                    dir.path() / files[i].name,
                    [&](const XPlane& plane) {
                      steps.add_plane(i, plane);
                      return absl::OkStatus();
                    },
                    &header, StepModelBuilder::wants_line)
                    .ok());
    steps.add_file_names(i, header.hostnames, run_directory::file_stem(files[i].name));
    steps.end_file(i);
  }
  const StepModel model = std::move(steps).finish();
  ASSERT_EQ(model.cores.size(), static_cast<size_t>(spec.ranks));
  EXPECT_EQ(serialize_deterministically(step_model_to_input_pipeline(model)),
            serialize_deterministically(shared->input_pipeline));
}

}  // namespace
}  // namespace podscope::analysis
