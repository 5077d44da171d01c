#include "coordinator/pod_snapshots.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <fstream>
#include <iterator>

#include "daemon/log.h"
#include "daemon/run_name.h"
#include "run_directory/run_directory.h"

namespace podscope::coordinator {
namespace {

// A busy runner (another capture) is asked again this often, for at most kBusyRetries times.
constexpr auto kBusyRetryPeriod = std::chrono::milliseconds(250);
constexpr int kBusyRetries = 120;
// After the span's end, the agents' clients still stream what they recorded (every 50 ms).
constexpr int64_t kStreamingSlackNs = 300'000'000;

pod_capture::SnapshotTrigger trigger_of(const podscope::v1::TriggerReport& r, int64_t step_end_coordinator_ns) {
  return pod_capture::SnapshotTrigger{r.host_name(),  r.reason(),    r.pid(),
                                      r.program(),    r.core_id(),   r.step_num(),
                                      r.step_ns(),    r.median_ns(), step_end_coordinator_ns,
                                      r.snapshot_id()};
}

// A reporter's reason as part of a run name: letters, digits and '_' only, at most 32 of them.
std::string run_name_part(std::string_view reason) {
  std::string out;
  for (char c : reason.substr(0, 32)) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out.empty() ? "trigger" : out;
}

}  // namespace

PodSnapshots::PodSnapshots(WorkerRegistry& registry, CaptureRunner& runner, PodSnapshotSettings settings,
                           const Clock& clock, CoordinatorMetrics& metrics)
    : registry_(registry), runner_(runner), settings_(std::move(settings)), clock_(clock), metrics_(metrics) {
  worker_ = std::thread([this] { run(); });
}

PodSnapshots::~PodSnapshots() { stop(); }

void PodSnapshots::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (worker_.joinable()) worker_.join();
}

absl::StatusOr<podscope::v1::TriggerReportResponse> PodSnapshots::report(const podscope::v1::TriggerReport& r) {
  const int64_t now = clock_.now_ns();
  std::optional<podscope::v1::WorkerInfo> reporter;
  for (podscope::v1::WorkerInfo& w : registry_.list(now)) {
    if (w.host_name() == r.host_name()) reporter = std::move(w);
  }
  if (!reporter) return absl::InvalidArgumentError("ReportTrigger: unknown worker \"" + r.host_name() + "\"");
  podscope::v1::TriggerReportResponse response;
  if (settings_.repository_root.empty()) {
    response.set_detail("the coordinator has no repository_root: it keeps no pod snapshot");
    return response;
  }
  // The worker's clock offset is agent − coordinator.
  const int64_t step_end = r.step_end_ns() - reporter->clock_offset_ns();
  const std::string& job = reporter->job();

  std::lock_guard lock(mu_);
  std::erase_if(recent_, [now](const auto& entry) { return entry.second <= now; });
  const auto key = std::make_pair(job, r.step_num());
  if (recent_.contains(key)) {
    response.set_detail("step " + std::to_string(r.step_num()) + " of job \"" + job + "\" already has a pod snapshot");
    return response;
  }
  recent_[key] = now + std::clamp<int64_t>(r.cooldown_ms(), 0, 3'600'000) * 1'000'000;
  if (auto waiting = std::find_if(pending_.begin(), pending_.end(), [&job](const Pending& p) { return p.job == job; });
      waiting != pending_.end()) {
    response.set_detail("joined the pod snapshot " + waiting->spec.session_id + " still waiting for its span to end");
    return response;
  }
  if (auto last = last_taken_.find(job);
      last != last_taken_.end() && now - last->second < settings_.min_interval_ms * 1'000'000) {
    metrics_.count_skipped_pod_snapshot("rate_limited");
    response.set_detail("job \"" + job + "\" had a pod snapshot " + std::to_string((now - last->second) / 1'000'000) +
                        " ms ago; at most one per " + std::to_string(settings_.min_interval_ms) +
                        " ms (pod_snapshot_min_interval_ms)");
    return response;
  }
  if (const uint64_t held = bytes_on_disk(); held >= static_cast<uint64_t>(settings_.max_bytes)) {
    metrics_.count_skipped_pod_snapshot("disk_cap");
    PODSCOPE_LOG(kWarning) << "no pod snapshot for " << r.host_name() << " step " << r.step_num() << ": the pod "
                           << "snapshots kept hold " << held << " bytes, pod_snapshot_max_mb allows "
                           << settings_.max_bytes;
    response.set_detail("the pod snapshots kept hold " + std::to_string(held) + " bytes, at pod_snapshot_max_mb (" +
                        std::to_string(settings_.max_bytes >> 20) + " MiB): none taken");
    return response;
  }
  last_taken_[job] = now;
  Pending pending;
  pending.job = job;
  pod_capture::CaptureSpec& spec = pending.spec;
  spec.session_id = tf_run_name(now) + "_" + run_name_part(r.reason()) + "_" + std::to_string(r.step_num());
  const int64_t before_ms = std::min(settings_.before_ms, std::max<int64_t>(r.window_ms() - settings_.after_ms, 1));
  spec.last_ms = before_ms + settings_.after_ms;
  spec.duration_ms = spec.last_ms;
  spec.num_tracing_attempts = 1;
  spec.window_end_ns = step_end + settings_.after_ms * 1'000'000;
  spec.trigger = trigger_of(r, step_end);
  spec.clock_sync_pings = settings_.clock_sync_pings;
  response.set_run_name(spec.session_id);
  PODSCOPE_LOG(kInfo) << "pod snapshot " << spec.session_id << " of job \"" << job << "\": " << r.host_name() << " pid "
                      << r.pid() << " step " << r.step_num() << " took " << r.step_ns() / 1e6 << " ms ("
                      << (r.median_ns() > 0 ? static_cast<double>(r.step_ns()) / static_cast<double>(r.median_ns()) : 0)
                      << "x its median)";
  pending_.push_back(std::move(pending));
  wake_.notify_all();
  return response;
}

uint64_t PodSnapshots::bytes_on_disk() const {
  const std::filesystem::path runs = run_directory::profile_root(settings_.repository_root);
  std::error_code ec;
  uint64_t total = 0;
  for (const auto& run : std::filesystem::directory_iterator(runs, ec)) {
    std::ifstream capture(run.path() / "capture.json");
    const std::string json((std::istreambuf_iterator<char>(capture)), std::istreambuf_iterator<char>());
    if (json.find("\"triggered_snapshot\"") == std::string::npos) continue;
    for (const auto& file : std::filesystem::recursive_directory_iterator(run.path(), ec)) {
      if (file.is_regular_file(ec)) total += file.file_size(ec);
    }
  }
  return total;
}

void PodSnapshots::run() {
  std::unique_lock lock(mu_);
  while (true) {
    wake_.wait(lock, [this] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    // Wait for the span to end (and the clients' streaming after it): a wait on the clock, cut short by stop().
    const int64_t ready_at = pending_.front().spec.window_end_ns + kStreamingSlackNs;
    const int64_t wait_ns = ready_at - clock_.now_ns();
    if (wait_ns > 0) {
      wake_.wait_for(lock, std::chrono::nanoseconds(wait_ns), [this] { return stopping_; });
      continue;
    }
    Pending pending = std::move(pending_.front());
    pending_.pop_front();
    lock.unlock();
    take(std::move(pending));
    lock.lock();
  }
}

void PodSnapshots::take(Pending pending) {
  std::vector<std::string> hosts;
  for (const podscope::v1::WorkerInfo& w : registry_.list(clock_.now_ns())) {
    if (w.up() && w.job() == pending.job) hosts.push_back(w.host_name());
  }
  const std::filesystem::path run_dir =
      run_directory::RunDirectory::in_logdir(settings_.repository_root, pending.spec.session_id).local_path();
  for (int attempt = 0; attempt < kBusyRetries; ++attempt) {
    auto outcome = runner_.run(hosts, pending.spec, run_dir, [](const std::string&) {});
    if (outcome.ok()) return;
    if (!absl::IsAlreadyExists(outcome.status())) {
      PODSCOPE_LOG(kWarning) << "pod snapshot " << pending.spec.session_id << " failed: " << outcome.status().message();
      return;
    }
    {
      std::unique_lock lock(mu_);
      if (wake_.wait_for(lock, kBusyRetryPeriod, [this] { return stopping_; })) return;
    }
  }
  PODSCOPE_LOG(kWarning) << "pod snapshot " << pending.spec.session_id << " not taken: the coordinator was capturing";
}

}  // namespace podscope::coordinator
