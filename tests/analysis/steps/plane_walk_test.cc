// One walk over a plane for every tool: each reader is handed the events of the lines it reads, in the plane's
// order, between its begin and end of each line; and the analysis that walks each plane once for all its tools
// gives every tool what the tool reading the planes on its own gives.
#include "analysis/steps/plane_walk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "analysis/tools/kernel_stats.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/tools/memory_profile.h"
#include "analysis/tools/op_stats.h"
#include "analysis/rendering/renderers.h"
#include "proto/xspace/serialize.h"
#include "analysis/runner/analysis_runner.h"
#include "analysis/steps/pod_steps.h"
#include "analysis/steps/step_database.h"
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
  const std::vector<run_directory::RunFile> files = *run_directory::list_run_files(dir);
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
  spec.tensorflow_gpu_odd_ranks = true;
  podscope::testing::ScratchDirectory dir("plane-walk");
  ASSERT_TRUE(testing::write_synthetic_pod(dir.path(), spec));
  const absl::StatusOr<AnalysisOutcome> shared = analyze_run_files(dir.path());
  ASSERT_TRUE(shared.ok()) << shared.status();

  OpStatsBuilder op_stats;
  read_alone(dir.path(), op_stats, OpStatsBuilder::wants_line);
  EXPECT_EQ(*xspace::serialize_deterministically(std::move(op_stats).finish().db),
            *xspace::serialize_deterministically(shared->result<OpStatsResult>().db));

  MemoryProfileBuilder memory;
  read_alone(dir.path(), memory, MemoryProfileBuilder::wants_line);
  const MemoryProfileResult memory_alone = std::move(memory).finish();
  EXPECT_GT(memory_alone.events, 0u);
  EXPECT_EQ(*xspace::serialize_deterministically(memory_alone.profile),
            *xspace::serialize_deterministically(shared->result<MemoryProfileResult>().profile));

  KernelStatsBuilder kernels;
  const std::vector<run_directory::RunFile> files = *run_directory::list_run_files(dir.path());
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
  EXPECT_EQ(*xspace::serialize_deterministically(kernels_alone.db),
            *xspace::serialize_deterministically(shared->result<KernelStatsResult>().db));

  std::vector<podscope::v1::HostStepDatabase> hosts;
  for (size_t i = 0; i < files.size(); ++i) {
    HostStepDatabaseBuilder steps;
    xspace::XSpaceHeader header;
    ASSERT_TRUE(xspace::read_xspace_planes(
                    dir.path() / files[i].name,
                    [&](const XPlane& plane) {
                      steps.add_plane(plane);
                      return absl::OkStatus();
                    },
                    &header, HostStepDatabaseBuilder::wants_line)
                    .ok());
    hosts.push_back(std::move(steps).finish(header.hostnames, run_directory::file_stem(files[i].name)));
    EXPECT_EQ(*xspace::serialize_deterministically(hosts.back()),
              *xspace::serialize_deterministically(shared->step_databases[i]));
  }
  const PodSteps model = merge_step_databases(hosts);
  ASSERT_EQ(model.cores.size(), static_cast<size_t>(spec.ranks));
  EXPECT_EQ(*xspace::serialize_deterministically(pod_steps_to_input_pipeline(model)),
            *xspace::serialize_deterministically(shared->result<tensorflow::profiler::InputPipelineAnalysisResult>()));
}

}  // namespace
}  // namespace podscope::analysis
