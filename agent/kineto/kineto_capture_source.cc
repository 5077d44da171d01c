#include "agent/kineto/kineto_capture_source.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <thread>

#include "daemon/host_metrics.h"
#include "daemon/log.h"
#include "kineto/ipc/on_demand_config.h"
#include "kineto/trace_file.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::agent {
namespace {

constexpr int64_t kNsPerMs = 1'000'000;
constexpr auto kDeliveryPoll = std::chrono::milliseconds(50);

// A distributed job's rank and world size as its launcher (torchrun, torch.distributed.launch) puts them in the
// process's environment: RANK and WORLD_SIZE. Unknown (-1) when the environment cannot be read (another user's
// process, without the capability) or does not say.
kineto::ProcessRank rank_from_environment(int32_t pid) {
  constexpr size_t kMaxEnvironmentBytes = 1 << 20;
  kineto::ProcessRank rank;
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  std::string entry;
  size_t read = 0;
  while (read < kMaxEnvironmentBytes && std::getline(in, entry, '\0')) {
    read += entry.size() + 1;
    int64_t* field = entry.starts_with("RANK=")         ? &rank.rank
                     : entry.starts_with("WORLD_SIZE=") ? &rank.world_size
                                                        : nullptr;
    if (!field) continue;
    const std::string_view value = std::string_view(entry).substr(entry.find('=') + 1);
    int64_t parsed = -1;
    const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
    if (error == std::errc() && end == value.data() + value.size() && parsed >= 0) *field = parsed;
  }
  return rank;
}

// A launcher: a polling process that is an ancestor of another (torchrun imports torch, so it polls too). It does
// no training; traced, its trace would take the core of the rank it is numbered as (it has no RANK).
bool is_launcher(const KinetoProcess& p, const std::vector<KinetoProcess>& live) {
  return std::any_of(live.begin(), live.end(), [&](const KinetoProcess& other) {
    return std::find(other.ancestors.begin(), other.ancestors.end(), p.pid) != other.ancestors.end();
  });
}

std::string seconds_text(int64_t ns) {
  const int64_t tenths = (ns + 50'000'000) / 100'000'000;
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " s";
}

// A converted trace names its host plane after its rank (offline, each file is a host row of the pod). Merged into
// a live capture, the host plane is the agent's host: the rank stays on the rank's own core plane.
void forget_host_identity(tensorflow::profiler::XSpace& converted) {
  for (tensorflow::profiler::XPlane& plane : *converted.mutable_planes()) {
    if (plane.name() != xspace::kHostPlaneName) continue;
    auto* stats = plane.mutable_stats();
    stats->erase(
        std::remove_if(stats->begin(), stats->end(),
                       [&](const tensorflow::profiler::XStat& s) {
                         const auto it = plane.stat_metadata().find(static_cast<int64_t>(s.metadata_id()));
                         return it != plane.stat_metadata().end() &&
                                (it->second.name() == xspace::kHostNameStat || it->second.name() == xspace::kRankStat);
                       }),
        stats->end());
  }
}

}  // namespace

KinetoCaptureSource::KinetoCaptureSource(std::shared_ptr<KinetoProcesses> processes, const Clock& clock,
                                         const std::filesystem::path& trace_root, prometheus::Registry& registry,
                                         const std::string& host_name)
    : processes_(std::move(processes)),
      clock_(clock),
      directory_(trace_root),
      merged_(host_counter(registry, host_name, "podscope_kineto_traces_merged_total",
                           "Traces of PyTorch (Kineto) processes merged into captures")) {
  auto& refused = host_family<prometheus::Counter>(registry, host_name, "podscope_kineto_traces_refused_total",
                                                   "Traces delivered by Kineto processes and not taken, by reason");
  for (size_t i = 0; i < kTraceRefusalCount; ++i) {
    refused_[i] = &refused.Add({{"reason", std::string(trace_refusal_name(static_cast<TraceRefusal>(i)))}});
  }
}

KinetoCaptureSource::~KinetoCaptureSource() = default;

StartLead KinetoCaptureSource::start_lead() const {
  const int64_t interval = processes_->longest_poll_interval_ns(clock_.now_ns());
  if (interval == 0) return {};
  const bool bounded = interval >= KinetoProcesses::kMaxAwaitedPollIntervalNs;
  return {interval + kConfigApplyMarginNs,
          "PyTorch (Kineto) processes learn of a capture at their next poll, every " + seconds_text(interval) +
              (bounded ? " or more here (a process polling less often is not waited for; " : " here (") +
              "ON_DEMAND_CONFIG_UPDATE_INTERVAL_SECS; docs/kineto.md tells how to shorten it)"};
}

void KinetoCaptureSource::plan(const CaptureWindow& window) {
  processes_->withdraw_all();
  requested_.clear();
  plan_warning_.clear();
  closed_ns_ = 0;
  planned_start_ns_ = window.start_ns;
  planned_end_ns_ = window.planned_end_ns;
  memory_limit_bytes_ = window.memory_limit_bytes;
  const std::vector<KinetoProcess> live = processes_->live(clock_.now_ns());
  if (live.empty()) return;
  directory_.remove_leftovers();
  ++sequence_;
  for (const KinetoProcess& p : live) {
    if (is_launcher(p, live)) continue;
    absl::StatusOr<std::filesystem::path> dir = directory_.directory_for(p.uid);
    if (!dir.ok()) {
      const std::string warning =
          "Kineto process " + std::to_string(p.pid) + " not traced: " + std::string(dir.status().message());
      PODSCOPE_LOG(kWarning) << warning;
      plan_warning_ += (plan_warning_.empty() ? "" : "; ") + warning;
      continue;
    }
    // The agent's pid in the name: processes of one uid in different containers may share their own pids.
    kineto::ipc::OnDemandTrace trace;
    trace.log_file = (*dir / ("trace" + std::to_string(sequence_) + "-" + std::to_string(p.pid) + ".json")).string();
    trace.start_unix_ms = (window.start_ns - clock_.offset_ns()) / kNsPerMs;
    trace.duration_ms = (window.planned_end_ns - window.start_ns) / kNsPerMs;
    trace.trace_id = std::to_string(sequence_);
    processes_->request_trace(p.pid, kineto::ipc::on_demand_config_text(trace));
    requested_.push_back(
        {p.pid, p.uid,
         std::filesystem::path(kineto::ipc::delivered_trace_path(trace.log_file, p.own_pid)).filename().string()});
  }
}

void KinetoCaptureSource::open(const CaptureWindow&) {}

void KinetoCaptureSource::close(int64_t end_ns) { closed_ns_ = end_ns; }

void KinetoCaptureSource::collect(CaptureSpace& out) {
  tensorflow::profiler::XSpace& space = out.space();
  if (!plan_warning_.empty()) space.add_warnings(plan_warning_);
  // Kineto traces the whole planned window whatever happens here: a window cut short (Terminate, a client gone,
  // the agent stopping) takes only the traces already delivered and waits for none.
  const bool cut_short = closed_ns_ > 0 && closed_ns_ < planned_end_ns_;
  const int64_t wait_ns = cut_short ? 0 : kDeliveryWaitNs + (planned_end_ns_ - planned_start_ns_) / 2;
  const int64_t deadline = cut_short ? closed_ns_ : std::max(planned_end_ns_, closed_ns_) + wait_ns;
  // What the capture holds already, from every source gathered before this one.
  uint64_t held_bytes = requested_.empty() ? 0 : out.written_planes().size() + space.ByteSizeLong();
  for (const Requested& r : requested_) {
    if (processes_->handoff(r.pid) != TraceHandoff::kHanded) {
      space.add_warnings("Kineto process " + std::to_string(r.pid) +
                         " did not poll for its trace request before the window started: not traced");
      continue;
    }
    if (std::string warning = take_trace(r, deadline, wait_ns, space, held_bytes); !warning.empty()) {
      space.add_warnings(warning);
    }
  }
  processes_->withdraw_all();
  requested_.clear();
  directory_.remove_leftovers();
}

std::string KinetoCaptureSource::take_trace(const Requested& r, int64_t deadline_ns, int64_t wait_ns,
                                            tensorflow::profiler::XSpace& space, uint64_t& held_bytes) {
  const std::string who = "Kineto process " + std::to_string(r.pid);
  // Kineto renames its finished ".tmp" into place: the file appears whole.
  TraceLookup found;
  while ((found = directory_.find(r.uid, r.file_name)).outcome == TraceLookup::Outcome::kAbsent) {
    if (clock_.now_ns() >= deadline_ns) {
      return wait_ns == 0 ? who + ": the window was cut short, its trace (of the whole planned window) not awaited"
                          : who + " delivered no trace within " + seconds_text(wait_ns) + " of the window's end";
    }
    std::this_thread::sleep_for(kDeliveryPoll);
  }
  std::string warning;
  if (found.outcome == TraceLookup::Outcome::kRefused) {
    warning = refuse_trace(found.refusal, who + ": " + found.detail + "; not taken");
  } else {
    const uint64_t left = memory_limit_bytes_ > held_bytes ? memory_limit_bytes_ - held_bytes : 0;
    const uint64_t max_text_bytes = std::min<uint64_t>(left / kConversionBytesPerTextByte, kineto::kMaxTraceBytes);
    if (static_cast<uint64_t>(found.trace.st.st_size) > max_text_bytes) {
      warning = refuse_trace(TraceRefusal::kTooLarge,
                             who + ": its trace is " + std::to_string(found.trace.st.st_size) + " bytes, beyond the " +
                                 std::to_string(max_text_bytes) + "-byte bound on a trace that this capture's " +
                                 "memory budget leaves (capture_memory_limit_mb: a trace's conversion holds up to " +
                                 std::to_string(kConversionBytesPerTextByte) + " times its text); not taken");
    } else {
      warning = merge_trace(r, found.trace, max_text_bytes, space, held_bytes);
    }
  }
  directory_.remove(r.uid, r.file_name);
  return warning;
}

std::string KinetoCaptureSource::merge_trace(const Requested& r, const OpenedTrace& trace, uint64_t max_text_bytes,
                                             tensorflow::profiler::XSpace& space, uint64_t& held_bytes) {
  const std::string who = "Kineto process " + std::to_string(r.pid);
  // Read through the descriptor already checked: its /proc/self/fd name is this very file, whatever the path
  // names by now.
  const std::string opened = "/proc/self/fd/" + std::to_string(trace.fd.get());
  absl::StatusOr<tensorflow::profiler::XSpace> converted =
      kineto::read_kineto_trace_file(opened, max_text_bytes, rank_from_environment(r.pid));
  if (!converted.ok()) {
    std::string message(converted.status().message());
    if (message.starts_with(opened)) message = "its trace " + r.file_name + message.substr(opened.size());
    if (converted.status().code() == absl::StatusCode::kResourceExhausted) {
      return refuse_trace(TraceRefusal::kTooLarge, who + ": " + message +
                                                       " (what this capture's memory budget leaves, "
                                                       "capture_memory_limit_mb); not taken");
    }
    return refuse_trace(TraceRefusal::kUnreadable, who + ": " + message);
  }
  if (!xspace::has_events(*converted)) {
    // An idle process (torchrun's launcher imports torch and polls too): its empty planes would only take the
    // names of the ranks' planes.
    return who + " traced no event in the window (idle: a launcher?); nothing merged";
  }
  for (const std::string& w : converted->warnings()) space.add_warnings(who + ": " + w);
  converted->clear_warnings();
  converted->clear_hostnames();
  // Kineto stamps the host's system clock; the capture is on the agent's.
  xspace::shift_timestamps(*converted, clock_.offset_ns());
  forget_host_identity(*converted);
  for (const auto& [was, is] : xspace::renumber_taken_device_planes(*converted, space)) {
    space.add_warnings(who + ": its " + was + " is shown as " + is + ", another process of this host named " +
                       "its own device so (processes number the GPUs they see from 0, as under " +
                       "CUDA_VISIBLE_DEVICES; the plane's rank tells them apart)");
  }
  held_bytes += converted->ByteSizeLong();
  xspace::merge_space(std::move(*converted), space);
  merged_.Increment();
  return "";
}

std::string KinetoCaptureSource::refuse_trace(TraceRefusal refusal, const std::string& warning) {
  refused_[static_cast<size_t>(refusal)]->Increment();
  PODSCOPE_LOG(kWarning) << warning;
  return warning;
}

KinetoCaptureSource::TraceCounts KinetoCaptureSource::trace_counts() const {
  TraceCounts out;
  out.merged = static_cast<uint64_t>(merged_.Value());
  for (size_t i = 0; i < kTraceRefusalCount; ++i) {
    out.refused.emplace_back(std::string(trace_refusal_name(static_cast<TraceRefusal>(i))),
                             static_cast<uint64_t>(refused_[i]->Value()));
  }
  return out;
}

}  // namespace podscope::agent
