// Framework profiler proxy: TensorFlow (`tf.profiler.experimental.server.start(port)`) and JAX
// (`jax.profiler.start_server(port)`) serve tensorflow.ProfilerService inside the training process and
// trace what only they see (XLA device ops, TPU/GPU activity, framework ops). For each capture window this
// source forwards the agent's ProfileRequest, unchanged in start time and duration, to every `--upstream`
// server and merges the XSpaces they return into the agent's own, on the agent's clock (a space whose times are
// relative to its session's start is put back on the epoch first). Upstream failures become XSpace warnings;
// upstream events are never filtered by our window, since older TF writes times that are not Unix epoch.
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
  // `addresses` are host:port of framework profiler servers (plaintext gRPC, as TF and JAX serve it), the
  // configured `upstream`; `announced` (may be empty) adds those that local processes announced.
  // `grace` bounds how long past the window's planned end collect() waits for an upstream to answer.
  UpstreamSource(std::vector<std::string> addresses, const Clock& clock, AnnouncedServers announced = {},
                 std::chrono::milliseconds grace = std::chrono::seconds(30));
  ~UpstreamSource() override;

  std::string_view name() const override { return "upstream"; }
  void open(const CaptureWindow& window) override;
  void close(int64_t end_ns) override;
  void collect(CaptureSpace& out) override;

 private:
  struct Upstream;
  struct Call;

  void join_all();
  // The configured and the announced servers, each once: channels kept for those still listed.
  std::vector<Upstream*> upstreams_for_window();
  std::unique_ptr<Upstream> connect(const std::string& address) const;

  const std::vector<std::string> configured_;
  const AnnouncedServers announced_;
  std::vector<std::unique_ptr<Upstream>> upstreams_;
  const Clock& clock_;
  const std::chrono::milliseconds grace_;
  CaptureWindow window_;
  std::vector<std::unique_ptr<Call>> calls_;  // one per upstream while a window is open
};

}  // namespace podscope::agent
