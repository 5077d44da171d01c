// The step database of one host (proto/podscope/v1/step_database.proto): every core's steps with where their time
// went, the events matched across cores, the per-op and input totals. Every tool that reads steps reads it: the pod
// viewer, the overview page and the input pipeline analyzer through the pod's steps (pod_steps.h), the trace window
// through FileStepSpans (step_spans.h). See docs/analysis.md, "The step database".
//
// One builder reads one host's file as its planes stream past, in the walks it shares with the other tools
// (plane_walk.h), and decides once for every tool:
//   - which step an event belongs to: the plane's own steps (step_spans.h: its Steps line, else the `group_id` of
//     its ops), else, when no device plane of the file has steps of its own, its file's host step markers;
//     collectives and channel endpoints by their `step_num` stat first;
//   - which steps are kept (the host's share of the one keep rule): a step cut by the capture window's edge and a
//     device step in which no device event ran are dropped and counted; a step missing on some core of the pod is
//     dropped when the hosts are merged (pod_steps.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analysis/steps/plane_walk.h"
#include "analysis/steps/step_events.h"
#include "analysis/steps/step_spans.h"
#include "podscope/v1/step_database.pb.h"
#include "tensorflow/xplane.pb.h"

namespace podscope::analysis {

class HostStepDatabaseBuilder final : public PlaneConsumer {
 public:
  HostStepDatabaseBuilder();
  ~HostStepDatabaseBuilder() override;

  // The lines it reads: device planes' Steps, op and Input Pipeline lines; host planes' lines except counters.
  static bool wants_line(std::string_view plane_name, std::string_view line_name);

  // A plane of the host's file (the file index is the caller's: one builder reads one file), in a walk shared with
  // other tools, or alone.
  void begin_plane(size_t file_index, const xspace::XPlaneReader& plane,
                   std::vector<PlaneEventReader*>& readers) override;
  void end_plane(size_t file_index) override;
  void add_plane(const tensorflow::profiler::XPlane& plane) { read_plane_alone(*this, 0, plane); }

  // Every plane of the file was read (or the file broke part way: what was read counts). The XSpace's `hostnames`
  // and the file's stem name the host when its planes do not.
  podscope::v1::HostStepDatabase finish(const std::vector<std::string>& hostnames, std::string_view file_stem) &&;

 private:
  struct File;
  struct PlaneWalk;
  std::unique_ptr<File> file_;
  std::unique_ptr<PlaneWalk> walk_;  // the plane being walked
};

// The step database of one host's file held whole.
podscope::v1::HostStepDatabase build_host_step_database(const tensorflow::profiler::XSpace& space,
                                                        std::string_view file_stem);

// The kept step spans of every device plane of one host's file, from its step database, for readers that need only
// the spans (the trace window): the planes as they stream past, then finish().
class FileStepSpans {
 public:
  static bool wants_line(std::string_view plane_name, std::string_view line_name) {
    return HostStepDatabaseBuilder::wants_line(plane_name, line_name);
  }
  void add_plane(const tensorflow::profiler::XPlane& plane);
  void add_file_names(const std::vector<std::string>& hostnames, std::string_view file_stem);

  struct PlaneSteps {
    std::string plane_name;
    std::optional<std::string> host_name;  // the plane's own host_name stat
    std::optional<int64_t> clock_offset_ns;
    std::vector<StepSpan> steps;
  };
  struct Result {
    std::string host_name;
    std::optional<int64_t> capture_start_ns;
    std::optional<int64_t> clock_offset_ns;  // the host's
    std::vector<PlaneSteps> planes;          // device planes, in file order
  };
  Result finish() &&;

 private:
  HostStepDatabaseBuilder builder_;
  std::vector<std::string> hostnames_;
  std::string file_stem_;
  std::vector<std::optional<int64_t>> plane_clock_offsets_;  // of the device planes, in file order
};

// A core's capability as the peak figures read it.
DeviceCapability device_capability(const podscope::v1::DeviceCapability& capability);

}  // namespace podscope::analysis
