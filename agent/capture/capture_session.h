// Captures, one at a time. CaptureSessions::run() validates a ProfileRequest, waits for its start time, opens
// a window on every CaptureSource, waits for the end — duration elapsed, Terminate, the client cancelling or
// passing its deadline, or agent shutdown: all the same path — closes every source, gathers one XSpace (serialized
// while it is built, see CaptureSpace) and, where the agent is configured for it and the client did not ask for it
// in the response, writes it under the repository root, within repository_quota_mb (RepositoryQuota).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "agent/capture/capture_source.h"
#include "agent/capture/repository_quota.h"
#include "daemon/clock.h"
#include "tensorflow/profiler_service.pb.h"

namespace podscope::agent {

struct CaptureLimits {
  int64_t max_duration_ms = 600000;
  std::string repository_root;  // empty: never write files
  size_t memory_limit_bytes = kDefaultCaptureMemoryLimitBytes;
  std::vector<std::string> allowed_repository_roots;  // bucket prefixes a request may name (bucket_uploads.h)
  std::string failed_uploads_directory;               // where a capture whose upload failed is kept
};

// One agent's capture as run() ends it: its XSpace and where it was written (a pod's capture, many agents' answers
// gathered, is pod_capture::CaptureResult).
struct CapturedSession {
  std::string session_id;
  std::string xspace;  // serialized
  bool empty_trace = false;
  std::string written_path;  // empty when not written (the XSpace was asked for in the response, or no root)
  // Written into a bucket: what a client reads of the capture instead of receiving it (describe_capture).
  std::string written_summary;
  std::string written_host_analysis;  // its analysis (bucket_uploads.h, CaptureDescription)
  // The upload into a bucket failed (ABORTED naming the object, why, and where the capture was kept): the request
  // fails with it, as TensorFlow's server fails a Profile it could not save.
  absl::Status write_error;
};

// TF servers' defaults for a request whose opts.version is 0.
void fill_profile_defaults(tensorflow::ProfileRequest& request);
// A requested duration as Profile and Monitor read it: 0 → 1000 ms (TF's default).
int64_t duration_or_default_ms(uint64_t requested_ms);
// A Profile's duration: opts.duration_ms, else duration_ms.
int64_t requested_duration_ms(const tensorflow::ProfileRequest& request);
// The one duration limit of Profile and Monitor: INVALID_ARGUMENT naming the duration and max_duration_ms.
absl::Status check_duration_limit(int64_t duration_ms, const CaptureLimits& limits);

// Whether the capture is written to disk, as TensorFlow's profiler server decides: only when the client did not ask
// for the XSpace in the response (emit_xspace).
bool writes_capture_file(const tensorflow::ProfileRequest& request);

// The host part of the capture's file name, as TensorFlow's server names it: the string
// opts.advanced_configuration["override_hostname"], else opts.override_hostname, else host_name (TensorFlow's client
// sends the host of the address it dialled), else the agent's own name; ':' becomes '_' ("10.0.0.2:8466" →
// "10.0.0.2_8466").
std::string capture_file_host(const tensorflow::ProfileRequest& request, const std::string& agent_host_name);

// Where the capture's file would go: `<dir>/<session_id>/<host>.xplane.pb` with <dir> the request's repository_root
// resolved against the configured root (empty: the root itself). An error says why nothing is written (no root
// configured, the path escapes it, the host is not a plain file name).
absl::StatusOr<std::string> resolve_capture_file(const std::string& configured_root, const std::string& requested_dir,
                                                 const std::string& session_id, const std::string& host_name);

// Whether a request's repository_root is a bucket (gs://, s3://) the agent may write into: OK for any other root.
absl::Status check_bucket_root(const std::string& requested_root, const CaptureLimits& limits);

// A validated request: what run() captures.
struct CapturePlan {
  std::string session_id;
  int64_t duration_ms = 0;
  int64_t start_ns = 0;                   // opts.start_timestamp_ns on the agent's clock; 0: on arrival
  std::shared_ptr<CaptureMemory> memory;  // capture_memory_limit_mb as it was when the request came
};

class CaptureSessions {
 public:
  // `sample_now` runs a sampling pass and returns its time stamp (agent clock); windows open and close on one.
  // Files written under the repository root are charged to `quota` (the agent's, shared with NewSession's runs).
  CaptureSessions(const Clock& clock, std::string host_name, std::function<int64_t()> sample_now,
                  RepositoryQuota& quota);

  void add_source(CaptureSource& source);  // before the first capture
  void set_limits(CaptureLimits limits);
  CaptureLimits limits() const;

  // Runs one capture to its end. `cancelled` is polled (the gRPC client went away or its deadline passed).
  // Errors: INVALID_ARGUMENT (bad duration / start / session id), ALREADY_EXISTS (one is running),
  // UNAVAILABLE (shutting down).
  absl::StatusOr<CapturedSession> run(tensorflow::ProfileRequest request, const std::function<bool()>& cancelled);
  // Ends the running capture with this id early; it answers with what was collected. Any other id is ignored,
  // as TensorFlow's profiler service answers OK whatever the id.
  void terminate(const std::string& session_id);
  // Ends a running capture and refuses new ones; waits (bounded) until the running one has answered.
  void shutdown(int64_t wait_ms);
  // Waits `duration_ms` unless shutdown or `cancelled` come first; false when interrupted.
  bool wait_for(int64_t duration_ms, const std::function<bool()>& cancelled);

  // The longest lead any source asks for now (StartLead): how far ahead a capture must be requested.
  StartLead start_lead() const;

  std::string running_session() const;
  uint64_t captures_served() const;

 private:
  // The phases of run(): validate, claim the one running slot, wait for the start and gather the window,
  // write the file where the agent is configured for it, release the slot.
  static absl::StatusOr<CapturePlan> plan_capture(const tensorflow::ProfileRequest& request, int64_t now,
                                                  const CaptureLimits& limits);
  absl::Status claim(const std::string& session_id);
  // Waits for the start, runs the window and adds the capture's own warnings; returns why it ended early ("").
  std::string gather(const CapturePlan& plan, const tensorflow::ProfileRequest& request, int64_t now,
                     const std::function<bool()>& cancelled, CaptureSpace& out);
  // Plans the window on every source: its start is the request's, or later by the longest lead a source asks
  // for (noted as the capture's first warning). Returns the start.
  int64_t plan_window(const CapturePlan& plan, const tensorflow::ProfileRequest& request, int64_t now,
                      CaptureSpace& out);
  // Opens every source at one sampling pass, waits for the end, closes them all at another and collects.
  std::string run_window(const CapturePlan& plan, const tensorflow::ProfileRequest& request,
                         const std::function<bool()>& cancelled, CaptureSpace& out);
  void write_to_repository(const tensorflow::ProfileRequest& request, const CaptureLimits& limits,
                           CapturedSession& result) const;
  void release();

  // Waits until `deadline_ns` (agent clock) or an end request; false when ended early.
  bool wait_until(int64_t deadline_ns, const std::function<bool()>& cancelled, std::unique_lock<std::mutex>& lock);
  // Why the running capture ends early ("" when it does not); with mu_ held.
  std::string ended_because() const;

  const Clock& clock_;
  std::string host_name_;
  std::function<int64_t()> sample_now_;
  RepositoryQuota& quota_;
  std::vector<CaptureSource*> sources_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  CaptureLimits limits_;
  bool running_ = false;
  std::string running_id_;
  std::string end_reason_;  // set when the running capture was asked to end early
  bool shutting_down_ = false;
  uint64_t served_ = 0;
};

}  // namespace podscope::agent
