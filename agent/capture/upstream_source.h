// Framework profiler proxy: TensorFlow (`tf.profiler.experimental.server.start(port)`) and JAX
// (`jax.profiler.start_server(port)`) serve tensorflow.ProfilerService inside the training process and
// trace what only they see (XLA device ops, TPU/GPU activity, framework ops). For each capture window this
// source forwards the agent's ProfileRequest, unchanged in start time and duration, to every `--upstream`
// server and merges the XSpaces they return into the agent's own, on the agent's clock (a space whose times are
// relative to its session's start is put back on the epoch first). Upstream failures become XSpace warnings;
// upstream events are never filtered by our window, since older TF writes times that are not Unix epoch.
//
// What the servers answer is charged to the capture's memory (CaptureMemory): when a window is planned with servers
// to ask, their answers reserve half of the capture's budget, shared equally; an answer longer than its share is not
// read (call_upstream_profile), and one is parsed only when its bytes and what they will cost parsed
// (parsed_size_bound) fit the share. An answer that does not fit is dropped, said in the capture's warnings naming
// capture_memory_limit_mb, and counted. A server that does not answer is waited for at most the window's duration past
// its end (at least kMinAnswerWait), as long as the framework takes to gather a trace of that length.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/capture/capture_source.h"
#include "daemon/clock.h"
#include "tensorflow/profiler_service.grpc.pb.h"

namespace podscope::agent {

class UpstreamSource : public CaptureSource {
 public:
  // The servers local processes announced now (host:port), asked at every window's open.
  using AnnouncedServers = std::function<std::vector<std::string>()>;
  // The least a server is waited for past the window's planned end: a framework gathers even a short trace for a
  // second or two, and several on a loaded host (as the pod capture allows each agent 10 s: answer_wait_ms).
  static constexpr std::chrono::milliseconds kMinAnswerWait{10000};

  // `addresses` are host:port of framework profiler servers (plaintext gRPC, as TF and JAX serve it), the
  // configured `upstream`; `announced` (may be empty) adds those that local processes announced. `on_refused`
  // (may be empty) counts each answer dropped at its share of the capture's memory.
  UpstreamSource(std::vector<std::string> addresses, const Clock& clock, AnnouncedServers announced = {},
                 std::function<void()> on_refused = {});
  ~UpstreamSource() override;

  std::string_view name() const override { return "upstream"; }
  void plan(const CaptureWindow& window) override;
  void open(const CaptureWindow& window) override;
  void close(int64_t end_ns) override;
  void collect(CaptureSpace& out) override;

 private:
  struct Upstream;
  struct Call;

  void join_all();
  // The configured and the announced servers, each once.
  std::vector<std::string> servers() const;
  // Their channels (for Terminate): channels kept for those still listed.
  std::vector<Upstream*> upstreams_for_window();
  std::unique_ptr<Upstream> connect(const std::string& address) const;
  // The call's answer merged into `space`, or a warning there saying why not.
  void merge_answer(Call& call, tensorflow::profiler::XSpace& space);
  // A warning that an answer was dropped at its share of the capture's memory, counted.
  void refuse(const std::string& who, const std::string& what, tensorflow::profiler::XSpace& space);

  const std::vector<std::string> configured_;
  const AnnouncedServers announced_;
  const std::function<void()> on_refused_;
  std::vector<std::unique_ptr<Upstream>> upstreams_;
  const Clock& clock_;
  CaptureWindow window_;
  size_t reserved_bytes_ = 0;                 // the servers' share of the window's capture memory
  size_t share_bytes_ = 0;                    // each server's
  std::vector<std::unique_ptr<Call>> calls_;  // one per upstream while a window is open
};

}  // namespace podscope::agent
