#include "agent/capture/capture_session.h"

#include <algorithm>
#include <filesystem>

#include "agent/capture/bucket_uploads.h"
#include "daemon/atomic_file.h"
#include "daemon/log.h"
#include "daemon/path_within_root.h"
#include "daemon/run_name.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "storage/location.h"

namespace podscope::agent {
namespace {

namespace fs = std::filesystem;
constexpr int64_t kPollNs = 20'000'000;  // how often a waiting capture checks whether its client went away

}  // namespace

void fill_profile_defaults(tensorflow::ProfileRequest& request) {
  tensorflow::ProfileOptions& opts = *request.mutable_opts();
  if (opts.version() == 0) {
    opts.set_host_tracer_level(2);
    opts.set_device_tracer_level(1);
    opts.set_python_tracer_level(0);
    opts.set_include_dataset_ops(true);
  }
}

int64_t duration_or_default_ms(uint64_t requested_ms) {
  if (requested_ms == 0) return 1000;
  return requested_ms > static_cast<uint64_t>(INT64_MAX / 1'000'000) ? INT64_MAX / 1'000'000
                                                                     : static_cast<int64_t>(requested_ms);
}

int64_t requested_duration_ms(const tensorflow::ProfileRequest& request) {
  return duration_or_default_ms(request.opts().duration_ms() != 0 ? request.opts().duration_ms()
                                                                  : request.duration_ms());
}

absl::Status check_duration_limit(int64_t duration_ms, const CaptureLimits& limits) {
  if (duration_ms <= limits.max_duration_ms) return absl::OkStatus();
  return absl::InvalidArgumentError("duration_ms " + std::to_string(duration_ms) + " exceeds the agent's limit " +
                                    "max_duration_ms=" + std::to_string(limits.max_duration_ms));
}

bool writes_capture_file(const tensorflow::ProfileRequest& request) {
  return !(request.has_emit_xspace() && request.emit_xspace());
}

std::string capture_file_host(const tensorflow::ProfileRequest& request, const std::string& agent_host_name) {
  const auto& advanced = request.opts().advanced_configuration();
  std::string host;
  if (auto it = advanced.find("override_hostname"); it != advanced.end() && !it->second.string_value().empty()) {
    host = it->second.string_value();
  } else if (!request.opts().override_hostname().empty()) {
    host = request.opts().override_hostname();
  } else if (!request.host_name().empty()) {
    host = request.host_name();
  } else {
    host = agent_host_name;
  }
  std::replace(host.begin(), host.end(), ':', '_');
  return host;
}

absl::StatusOr<std::string> resolve_capture_file(const std::string& configured_root, const std::string& requested_dir,
                                                 const std::string& session_id, const std::string& host_name) {
  if (!configured_root.empty() && !is_plain_path_component(host_name)) {
    return absl::InvalidArgumentError("not written to disk: host name '" + host_name +
                                      "' is not a plain file name (no '/', not '.' or '..')");
  }
  absl::StatusOr<fs::path> resolved = confine_to_root(
      configured_root, fs::path(requested_dir) / session_id,
      {.no_root = "not written to disk: the agent has no --repository_root; the data is in the response only",
       .outside_code = absl::StatusCode::kPermissionDenied,
       .outside_prefix = "not written to disk, outside --repository_root: repository path "});
  if (!resolved.ok()) return resolved.status();
  // A session id used before (by this host) gets the first free suffix: an earlier capture is never overwritten.
  const std::string file_name = host_name + ".xplane.pb";
  fs::path dir = *resolved;
  for (int suffix = 1; fs::exists(dir / file_name); ++suffix) {
    if (suffix > 10'000) return absl::ResourceExhaustedError("not written to disk: no free suffix for " + dir.string());
    dir = resolved->string() + "_" + std::to_string(suffix);
  }
  return (dir / file_name).string();
}

absl::Status check_bucket_root(const std::string& requested_root, const CaptureLimits& limits) {
  if (!storage::is_bucket_url(requested_root)) return absl::OkStatus();
  return allow_bucket_root(requested_root, limits.allowed_repository_roots, "a capture request");
}

CaptureSessions::CaptureSessions(const Clock& clock, std::string host_name, std::function<int64_t()> sample_now,
                                 RepositoryQuota& quota)
    : clock_(clock), host_name_(std::move(host_name)), sample_now_(std::move(sample_now)), quota_(quota) {}

void CaptureSessions::add_source(CaptureSource& source) { sources_.push_back(&source); }

void CaptureSessions::set_limits(CaptureLimits limits) {
  std::lock_guard lock(mu_);
  limits_ = std::move(limits);
}

CaptureLimits CaptureSessions::limits() const {
  std::lock_guard lock(mu_);
  return limits_;
}

std::string CaptureSessions::running_session() const {
  std::lock_guard lock(mu_);
  return running_ ? running_id_ : std::string();
}

uint64_t CaptureSessions::captures_served() const {
  std::lock_guard lock(mu_);
  return served_;
}

bool CaptureSessions::wait_until(int64_t deadline_ns, const std::function<bool()>& cancelled,
                                 std::unique_lock<std::mutex>& lock) {
  for (;;) {
    if (!end_reason_.empty() || shutting_down_) return false;
    if (cancelled && cancelled()) {
      end_reason_ = "client cancelled or passed its deadline";
      return false;
    }
    const int64_t left = deadline_ns - clock_.now_ns();
    if (left <= 0) return true;
    cv_.wait_for(lock, std::chrono::nanoseconds(std::min(left, kPollNs)));
  }
}

bool CaptureSessions::wait_for(int64_t duration_ms, const std::function<bool()>& cancelled) {
  std::unique_lock lock(mu_);
  const int64_t deadline = clock_.now_ns() + duration_ms * 1'000'000;
  for (;;) {
    if (shutting_down_ || (cancelled && cancelled())) return false;
    const int64_t left = deadline - clock_.now_ns();
    if (left <= 0) return true;
    cv_.wait_for(lock, std::chrono::nanoseconds(std::min(left, kPollNs)));
  }
}

absl::StatusOr<CapturedSession> CaptureSessions::run(tensorflow::ProfileRequest request,
                                                     const std::function<bool()>& cancelled) {
  fill_profile_defaults(request);
  const int64_t now = clock_.now_ns();
  const CaptureLimits limits = this->limits();
  absl::StatusOr<CapturePlan> plan = plan_capture(request, now, limits);
  if (!plan.ok()) return plan.status();
  if (absl::Status claimed = claim(plan->session_id); !claimed.ok()) return claimed;

  CapturedSession result;
  result.session_id = plan->session_id;
  std::string end_reason;
  {
    CaptureSpace out(host_name_);
    end_reason = gather(*plan, request, now, cancelled, out);
    result.empty_trace = !out.has_events();
    result.xspace = out.finish();
  }
  write_to_repository(request, limits, result);
  PODSCOPE_LOG(kInfo) << "capture " << result.session_id << " done"
                      << (end_reason.empty() ? "" : " (" + end_reason + ")")
                      << (result.written_path.empty() ? "" : ", wrote " + result.written_path);
  release();
  return result;
}

absl::StatusOr<CapturePlan> CaptureSessions::plan_capture(const tensorflow::ProfileRequest& request, int64_t now,
                                                          const CaptureLimits& limits) {
  CapturePlan plan;
  plan.memory = std::make_shared<CaptureMemory>(limits.memory_limit_bytes);
  plan.duration_ms = requested_duration_ms(request);
  if (absl::Status s = check_duration_limit(plan.duration_ms, limits); !s.ok()) return s;
  plan.start_ns = static_cast<int64_t>(request.opts().start_timestamp_ns());
  if (plan.start_ns > now + limits.max_duration_ms * 1'000'000) {
    return absl::InvalidArgumentError("opts.start_timestamp_ns " + std::to_string(plan.start_ns) + " is " +
                                      std::to_string((plan.start_ns - now) / 1'000'000) +
                                      " ms ahead of the agent's clock; at most max_duration_ms=" +
                                      std::to_string(limits.max_duration_ms) + " ahead is accepted");
  }
  plan.session_id = !request.session_id().empty()          ? request.session_id()
                    : !request.opts().session_id().empty() ? request.opts().session_id()
                                                           : tf_run_name(now);
  if (!is_plain_path_component(plan.session_id)) {
    return absl::InvalidArgumentError("session_id '" + plan.session_id +
                                      "' must be a single path component (no '/', not '.' or '..')");
  }
  // A bucket the agent may not write is refused before anything is captured.
  if (writes_capture_file(request)) {
    if (absl::Status s = check_bucket_root(request.repository_root(), limits); !s.ok()) return s;
  }
  return plan;
}

absl::Status CaptureSessions::claim(const std::string& session_id) {
  std::lock_guard lock(mu_);
  if (shutting_down_) return absl::UnavailableError("agent is shutting down; no new captures");
  if (running_) {
    return absl::AlreadyExistsError("a capture is already running on this agent: session '" + running_id_ +
                                    "'; one capture at a time");
  }
  running_ = true;
  running_id_ = session_id;
  end_reason_.clear();
  return absl::OkStatus();
}

std::string CaptureSessions::gather(const CapturePlan& plan, const tensorflow::ProfileRequest& request, int64_t now,
                                    const std::function<bool()>& cancelled, CaptureSpace& out) {
  std::vector<std::string> warnings;
  if (plan.start_ns > 0 && plan.start_ns < now) {
    warnings.push_back("requested start " + std::to_string(plan.start_ns) + " was " +
                       std::to_string((now - plan.start_ns) / 1'000'000) +
                       " ms in the past on the agent's clock; the capture started on arrival");
  }
  const int64_t start_ns = plan_window(plan, request, now, out);
  std::unique_lock lock(mu_);
  const bool reached_start = start_ns <= now || wait_until(start_ns, cancelled, lock);
  std::string end_reason;
  if (reached_start) {
    lock.unlock();
    end_reason = run_window(plan, request, cancelled, out);
    if (!end_reason.empty()) warnings.push_back("capture ended early: " + end_reason);
  } else {
    end_reason = ended_because();
    lock.unlock();
    warnings.push_back("capture ended before its start time (" + end_reason + ")");
  }
  for (std::string& w : warnings) out.space().add_warnings(std::move(w));
  return end_reason;
}

StartLead CaptureSessions::start_lead() const {
  StartLead lead;
  for (const CaptureSource* s : sources_) {
    StartLead l = s->start_lead();
    if (l.ns > lead.ns) lead = std::move(l);
  }
  return lead;
}

int64_t CaptureSessions::plan_window(const CapturePlan& plan, const tensorflow::ProfileRequest& request, int64_t now,
                                     CaptureSpace& out) {
  int64_t start_ns = std::max(plan.start_ns, now);
  const StartLead lead = start_lead();
  if (lead.ns > 0 && start_ns < now + lead.ns) {
    const int64_t delay_ms = (now + lead.ns - std::max(plan.start_ns, now)) / 1'000'000;
    start_ns = now + lead.ns;
    // The capture's first warning: the wait is the first thing its user notices.
    out.space().add_warnings("capture started " + std::to_string(delay_ms) +
                             " ms later than requested: " + lead.reason);
    PODSCOPE_LOG(kInfo) << "capture " << plan.session_id << " starts in " << lead.ns / 1'000'000
                        << " ms: " << lead.reason;
  }
  CaptureWindow window;
  window.session_id = plan.session_id;
  window.start_ns = start_ns;
  window.planned_end_ns = start_ns + plan.duration_ms * 1'000'000;
  window.request = request;
  window.memory_limit_bytes = plan.memory->limit_bytes();
  window.memory = plan.memory;
  for (CaptureSource* s : sources_) s->plan(window);
  return start_ns;
}

std::string CaptureSessions::run_window(const CapturePlan& plan, const tensorflow::ProfileRequest& request,
                                        const std::function<bool()>& cancelled, CaptureSpace& out) {
  CaptureWindow window;
  window.session_id = plan.session_id;
  window.start_ns = sample_now_();
  window.planned_end_ns = window.start_ns + plan.duration_ms * 1'000'000;
  window.request = request;
  window.memory_limit_bytes = plan.memory->limit_bytes();
  window.memory = plan.memory;
  for (CaptureSource* s : sources_) s->open(window);
  PODSCOPE_LOG(kInfo) << "capture " << plan.session_id << " started, " << plan.duration_ms << " ms";
  std::string end_reason;
  {
    std::unique_lock lock(mu_);
    wait_until(window.planned_end_ns, cancelled, lock);
    end_reason = ended_because();
  }
  const int64_t end_ns = sample_now_();
  for (CaptureSource* s : sources_) s->close(end_ns);
  for (CaptureSource* s : sources_) s->collect(out);
  xspace::XPlaneBuilder(&out.host_plane())
      .stats()
      .add(xspace::kCaptureStartStat, window.start_ns)
      .add(xspace::kCaptureEndStat, end_ns);
  return end_reason;
}

std::string CaptureSessions::ended_because() const {
  return shutting_down_ && end_reason_.empty() ? "agent shutting down" : end_reason_;
}

void CaptureSessions::write_to_repository(const tensorflow::ProfileRequest& request, const CaptureLimits& limits,
                                          CapturedSession& result) const {
  if (!writes_capture_file(request)) return;
  // TensorFlow's server writes under repository_root; opts.repository_path is for in-process sessions only.
  const std::string& requested_dir = request.repository_root();
  if (storage::is_bucket_url(requested_dir)) {
    absl::StatusOr<std::string> uploaded =
        upload_capture(requested_dir, result.session_id, capture_file_host(request, host_name_), result.xspace,
                       limits.failed_uploads_directory, quota_);
    if (!uploaded.ok()) {
      result.write_error = uploaded.status();
      return;
    }
    result.written_path = *uploaded;
    CaptureDescription description = describe_capture(result.xspace, capture_file_host(request, host_name_));
    if (!description.host_analysis.empty()) {
      // Without it the run's analysis reads the file back: worth a warning, not the capture.
      if (absl::Status s = upload_host_database(result.written_path, result.xspace.size(), description.host_analysis);
          !s.ok()) {
        PODSCOPE_LOG(kWarning) << "the host database of " << result.written_path << " was not written: " << s.message();
      }
    }
    result.written_summary = std::move(description.summary);
    result.written_host_analysis = std::move(description.host_analysis);
    result.xspace = std::string();
    return;
  }
  absl::StatusOr<std::string> file = resolve_capture_file(limits.repository_root, requested_dir, result.session_id,
                                                          capture_file_host(request, host_name_));
  if (!file.ok()) {
    // Asking for no path from an agent without a root is the normal remote case: nothing to warn about.
    if (!requested_dir.empty() || !limits.repository_root.empty()) {
      append_warning(std::string(file.status().message()), result.xspace);
    }
    return;
  }
  absl::StatusOr<RepositoryQuota::PlannedWrite> admitted = quota_.admit(fs::path(*file).parent_path());
  if (!admitted.ok()) {
    append_warning(std::string(admitted.status().message()), result.xspace);
    return;
  }
  if (absl::Status s = write_file_atomically(*file, result.xspace); s.ok()) {
    result.written_path = *file;
    quota_.charge(*admitted, *file, result.xspace.size());
  } else {
    append_warning("not written to disk: " + std::string(s.message()), result.xspace);
  }
}

void CaptureSessions::release() {
  {
    std::lock_guard lock(mu_);
    running_ = false;
    running_id_.clear();
    ++served_;
  }
  cv_.notify_all();
}

void CaptureSessions::terminate(const std::string& session_id) {
  {
    std::lock_guard lock(mu_);
    if (!running_ || running_id_ != session_id) return;
    if (end_reason_.empty()) end_reason_ = "terminated by request";
  }
  cv_.notify_all();
}

void CaptureSessions::shutdown(int64_t wait_ms) {
  std::unique_lock lock(mu_);
  shutting_down_ = true;
  cv_.notify_all();
  cv_.wait_for(lock, std::chrono::milliseconds(wait_ms), [this] { return !running_; });
}

}  // namespace podscope::agent
