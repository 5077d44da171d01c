#include "pod_capture/capture_files.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "trace_writers/json_text.h"
#include "trace_writers/pod_trace.h"
#include "proto/xspace/names.h"
#include "proto/xspace/serialize.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::pod_capture {
namespace {

const char* clock_kind_name(ClockMeasurement::Kind kind) {
  switch (kind) {
    case ClockMeasurement::kMeasured: return "measured";
    case ClockMeasurement::kNoPingRpc: return "no_ping_rpc";
    case ClockMeasurement::kUnreachable: return "unreachable";
  }
  return "unknown";
}

// A time in ns as the capture summary prints it: ms with 3 decimals.
std::string ns_as_ms_text(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1e6);
  return buf;
}

// `[{"core": 2, "pid": 4242, "events": 1234, "steps": 56}, ...]`.
std::string budget_drops_json(const std::vector<BudgetDrop>& drops) {
  std::string out = "[";
  for (const BudgetDrop& d : drops) {
    if (out.size() > 1) out += ", ";
    out += "{\"core\": " + std::to_string(d.core) + ", \"pid\": " + std::to_string(d.pid) +
           ", \"events\": " + std::to_string(d.events) + ", \"steps\": " + std::to_string(d.steps) + "}";
  }
  return out + "]";
}

}  // namespace

namespace {

// Stamps the host's clock measurement onto every plane of its space (names from proto/xspace/names.h).
void record_clock_stats(const HostCapture& host, tensorflow::profiler::XSpace& space) {
  // Analysis reads a host's clock from its /host:CPU plane, so that plane exists in every file we write.
  xspace::find_or_add_plane(space, xspace::kHostPlaneName);
  for (auto& plane : *space.mutable_planes()) {
    xspace::XPlaneBuilder builder(&plane);
    // A re-written file must not carry two values for one stat: drop earlier ones first.
    auto* stats = plane.mutable_stats();
    for (std::string_view name : {xspace::kClockOffsetStat, xspace::kClockRttStat, xspace::kClockDriftStat}) {
      const int64_t id = builder.stat_metadata_id(name);
      for (int i = stats->size() - 1; i >= 0; --i) {
        if (stats->Get(i).metadata_id() == id) stats->DeleteSubrange(i, 1);
      }
    }
    builder.stats()
        .add(xspace::kClockOffsetStat, host.clock.estimate.offset_ns)
        .add(xspace::kClockRttStat, host.clock.estimate.rtt_ns)
        .add(xspace::kClockDriftStat, host.clock_drift_ppm);
  }
  if (space.hostnames_size() == 0) space.add_hostnames(host.host_name);
}

// A host's file and its planes in the pod traces: its answer parsed (the one parsed space the writing holds) and
// released, its clock stamped, the file written, the planes fed to `traces`.
absl::Status write_host(const run_directory::RunDirectory& run, HostCapture& host, PodTraceWriter& traces) {
  ParsedAnswer parsed;
  const bool ok = parsed.parse(host.xspace);
  // Held beside the parsed space and the file's bytes, the answer would add its size to the writing's peak.
  host.xspace = std::string();
  if (!ok) return absl::DataLossError("the XSpace of " + host.address + " does not parse");
  tensorflow::profiler::XSpace& space = parsed.space();
  record_clock_stats(host, space);
  {
    absl::StatusOr<std::string> bytes = xspace::serialize_deterministically(space);
    if (!bytes.ok()) {
      return absl::Status(bytes.status().code(),
                          "cannot write the XSpace of " + host.address + ": " + std::string(bytes.status().message()));
    }
    if (auto status = run.write(run_directory::host_file_name(host.file_stem), *bytes, Durability::kSynced);
        !status.ok())
      return status;
  }
  for (const auto& plane : space.planes()) traces.add_plane({host.host_name, host.clock.estimate.offset_ns}, plane);
  return absl::OkStatus();
}

// The merged traces of a capture's hosts (pod.trace.json.gz, pod.perfetto-trace), JSON times relative to the
// capture's start: none when no host captured.
absl::StatusOr<std::unique_ptr<PodTraceWriter>> open_capture_traces(const run_directory::RunDirectory& run,
                                                                    const CaptureResult& result) {
  if (std::none_of(result.hosts.begin(), result.hosts.end(), [](const HostCapture& h) { return h.ok; })) {
    return nullptr;
  }
  return PodTraceWriter::open(run, kPodTraceStem, result.start_ns);
}

// A window of the agents' flight recorders: what it is (the last N ms on request, or a triggered snapshot and
// the slow step that froze it), its span in coordinator time, and what a recorder cannot hold.
std::string recorded_window_json(const CaptureResult& result) {
  std::string out = "{\"kind\": ";
  append_json_string(out, result.trigger ? "triggered_snapshot" : "last_ms");
  out += ", \"start_ns\": " + std::to_string(result.start_ns);
  out += ", \"end_ns\": " + std::to_string(result.start_ns + result.last_ms * 1'000'000);
  out +=
      ", \"left_out\": [\"upstream framework profiler servers (they cannot look back)\", "
      "\"device tracers (CUPTI is not run always-on)\"]";
  if (const std::optional<SnapshotTrigger>& t = result.trigger) {
    out += ",\n    \"trigger\": {\"reason\": ";
    append_json_string(out, t->reason);
    out += ", \"host_name\": ";
    append_json_string(out, t->host_name);
    out += ", \"pid\": " + std::to_string(t->pid) + ", \"program\": ";
    append_json_string(out, t->program);
    out += ", \"core_id\": " + std::to_string(t->core_id) + ", \"step_num\": " + std::to_string(t->step_num);
    out += ", \"step_ns\": " + std::to_string(t->step_ns) + ", \"median_ns\": " + std::to_string(t->median_ns);
    out += ", \"times_median\": " +
           std::to_string(t->median_ns > 0 ? static_cast<double>(t->step_ns) / static_cast<double>(t->median_ns) : 0);
    out += ", \"step_end_ns\": " + std::to_string(t->step_end_ns) + ", \"agent_snapshot_id\": ";
    append_json_string(out, t->agent_snapshot_id);
    out += "}";
  }
  return out + "}";
}

}  // namespace

std::string capture_json(const CaptureResult& result) {
  std::string out = "{\n  \"run\": ";
  append_json_string(out, result.session_id);
  out += ",\n  \"duration_ms\": " + std::to_string(result.duration_ms);
  if (result.last_ms > 0) out += ",\n  \"recorded_window\": " + recorded_window_json(result);
  out += ",\n  \"attempts\": " + std::to_string(result.attempts);
  out += ",\n  \"kept_attempt\": " + std::to_string(result.kept_attempt);
  out += ",\n  \"start_time_ns\": " + std::to_string(result.start_ns);
  // The kept attempt, from its opening clock-sync burst to the last agent's answer (a window of the past needs
  // no waiting for the future).
  out += ",\n  \"collected_in_ms\": " + std::to_string((result.gathered_ns - result.sync_begin_ns) / 1'000'000);
  // Its phases: the opening clock-sync burst, issuing every call, and how far ahead of the start the last call
  // went out (negative: after it, so some agent started late). A window of the past has no start to be ahead of.
  out += ",\n  \"clock_sync_in_ms\": " + std::to_string((result.synced_ns - result.sync_begin_ns) / 1'000'000);
  if (result.last_ms == 0) {
    out += ",\n  \"issued_in_ms\": " + std::to_string((result.issued_ns - result.synced_ns) / 1'000'000);
    out += ",\n  \"issued_ahead_of_start_ms\": " + std::to_string((result.start_ns - result.issued_ns) / 1'000'000);
  }
  out += ",\n  \"second_clock_burst\": {\"largest_window\": " + std::to_string(result.second_burst.largest_window) +
         ", \"fell_behind\": " + (result.second_burst.fell_behind ? "true" : "false") + "}";
  if (result.analyzed_in_ms) out += ",\n  \"analyzed_in_ms\": " + std::to_string(*result.analyzed_in_ms);
  out += ",\n  \"start_skew_ns\": " + (result.start_skew_ns ? std::to_string(*result.start_skew_ns) : "null");
  out += ",\n  \"exit_code\": " + std::to_string(result.exit_code());
  // Sent as TensorFlow's client sends it and ignored, as TensorFlow's servers ignore it: each agent's
  // capture_memory_limit_mb bounds a capture instead (what it dropped: each host's "budget_drops").
  out += ",\n  \"max_events_requested\": " + std::to_string(kRequestedMaxEvents);
  out += ",\n  \"max_events_applied\": false";
  out += ",\n  \"warnings\": [";
  for (size_t i = 0; i < result.warnings.size(); ++i) {
    if (i) out += ", ";
    append_json_string(out, result.warnings[i]);
  }
  out += "],\n  \"hosts\": [";
  for (size_t i = 0; i < result.hosts.size(); ++i) {
    const HostCapture& h = result.hosts[i];
    out += i ? ",\n    {" : "\n    {";
    out += "\"address\": ";
    append_json_string(out, h.address);
    out += ", \"file\": ";
    append_json_string(out, h.ok ? run_directory::host_file_name(h.file_stem) : "");
    out += ", \"host_name\": ";
    append_json_string(out, h.host_name);
    out += std::string(", \"ok\": ") + (h.ok ? "true" : "false");
    out += ", \"error\": ";
    append_json_string(out, h.error);
    out += ", \"clock\": ";
    append_json_string(out, clock_kind_name(h.clock.kind));
    out += ", \"clock_offset_ns\": " + std::to_string(h.clock.estimate.offset_ns);
    out += ", \"clock_rtt_ns\": " + std::to_string(h.clock.estimate.rtt_ns);
    out += ", \"clock_error_bound_ns\": " + std::to_string(h.clock.estimate.error_bound_ns);
    out += ", \"clock_offset_before_ns\": " + std::to_string(h.clock_before.estimate.offset_ns);
    out += ", \"clock_rtt_before_ns\": " + std::to_string(h.clock_before.estimate.rtt_ns);
    out += ", \"clock_offset_after_ns\": " + std::to_string(h.clock_after.estimate.offset_ns);
    out += ", \"clock_rtt_after_ns\": " + std::to_string(h.clock_after.estimate.rtt_ns);
    out += ", \"requested_start_ns\": " + std::to_string(h.requested_start_ns);
    out += ", \"actual_start_ns\": " +
           (h.actual_start_merged_ns ? std::to_string(*h.actual_start_merged_ns) : std::string("null"));
    if (result.last_ms > 0) {
      // The span the host's flight recorder held whole: from here to the window's end.
      const int64_t end_ns = result.start_ns + result.last_ms * 1'000'000;
      out +=
          ", \"recorded_whole_since_ns\": " +
          (h.recorded_whole_since_merged_ns ? std::to_string(*h.recorded_whole_since_merged_ns) : std::string("null"));
      out += ", \"recorded_held_ms\": " +
             (h.recorded_whole_since_merged_ns
                  ? std::to_string(
                        std::clamp<int64_t>(end_ns - *h.recorded_whole_since_merged_ns, 0, result.last_ms * 1'000'000) /
                        1'000'000)
                  : std::string("null"));
    }
    out += ", \"attempts\": " + std::to_string(h.attempts);
    out += ", \"budget_drops\": " + budget_drops_json(h.budget_drops) + "}";
  }
  out += "\n  ]\n}\n";
  return out;
}

std::string capture_summary_text(const CaptureResult& result, std::string_view run_location) {
  std::string out;
  for (const auto& h : result.hosts) {
    out += "  " + h.file_stem + " (" + h.host_name + "): ";
    if (h.ok) {
      out += "ok";
      int64_t events = 0, steps = 0;
      for (const BudgetDrop& d : h.budget_drops) {
        events += d.events;
        steps += d.steps;
      }
      if (events > 0) {
        out += " (its capture_memory_limit_mb dropped " + std::to_string(events) + " events in " +
               std::to_string(steps) + " whole steps; see capture.json)";
      }
    } else {
      out += "FAILED: " + h.error;
    }
    if (h.clock.kind == ClockMeasurement::kMeasured) {
      out += ", clock offset " + ns_as_ms_text(h.clock.estimate.offset_ns) + " ms ± " +
             ns_as_ms_text(h.clock.estimate.error_bound_ns) + " ms (rtt " + ns_as_ms_text(h.clock.estimate.rtt_ns) +
             " ms)";
      if (h.clock_before.kind == ClockMeasurement::kMeasured && h.clock_after.kind == ClockMeasurement::kMeasured) {
        out += ", change during capture " +
               ns_as_ms_text(h.clock_after.estimate.offset_ns - h.clock_before.estimate.offset_ns) + " ms";
      }
    } else {
      out += ", clock: " + h.clock.detail;
    }
    out += "\n";
  }
  if (result.start_skew_ns) out += "Start skew across hosts: " + ns_as_ms_text(*result.start_skew_ns) + " ms\n";
  for (const auto& w : result.warnings) out += "Warning: " + w + "\n";
  const int ok = static_cast<int>(
      std::count_if(result.hosts.begin(), result.hosts.end(), [](const HostCapture& h) { return h.ok; }));
  out += std::to_string(ok) + " of " + std::to_string(result.hosts.size()) + " host(s) captured";
  if (ok > 0 && !run_location.empty()) out += "; files in " + std::string(run_location);
  out += "\n";
  return out;
}

namespace {

// A run whose agents wrote their own host files into the bucket: only capture.json (the pod traces would read every
// host's file back: `podscope analyze` makes them).
absl::Status write_bucket_run_files(const run_directory::RunDirectory& run, CaptureResult& result) {
  return run.write(run_directory::kCaptureRecordName, capture_json(result), Durability::kSynced);
}

}  // namespace

absl::StatusOr<run_directory::RunDirectory> write_run_directory(const std::filesystem::path& logdir,
                                                                CaptureResult& result) {
  const run_directory::RunDirectory run = run_directory::RunDirectory::in_logdir(logdir, result.session_id);
  if (auto status = write_run_files(run, result); !status.ok()) return status;
  return run;
}

absl::Status write_run_files(const run_directory::RunDirectory& run, CaptureResult& result) {
  if (run.in_bucket()) return write_bucket_run_files(run, result);
  auto traces = open_capture_traces(run, result);
  if (!traces.ok()) return traces.status();
  for (auto& host : result.hosts) {
    if (!host.ok) continue;
    if (auto status = write_host(run, host, **traces); !status.ok()) return status;
  }
  if (auto status = run.write(run_directory::kCaptureRecordName, capture_json(result), Durability::kSynced);
      !status.ok())
    return status;
  if (*traces == nullptr) return absl::OkStatus();
  return (*traces)->commit().status();
}

}  // namespace podscope::pod_capture
