// Client of libtpu's runtime metric service (tpu.monitoring.runtime.RuntimeMetricService, the service
// `tpu-info` reads; localhost:8431 by default). Kept apart from the collector so that the collector stays
// free of gRPC and is testable with a fake source.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace podscope::agent {

// One value of one metric for one device (a chip or core, as the runtime numbers them).
struct TpuMetricPoint {
  int64_t device_id = 0;
  double value = 0;
};

class TpuMetricSource {
 public:
  virtual ~TpuMetricSource() = default;
  // The current values of `metric_name`. NOT_FOUND when the runtime does not support the metric,
  // UNAVAILABLE (or DEADLINE_EXCEEDED) when no runtime answers.
  virtual absl::StatusOr<std::vector<TpuMetricPoint>> get(std::string_view metric_name) = 0;
  virtual std::string_view address() const = 0;
};

// An absent service must cost next to nothing (the agent polls it every second on every host, TPU or not),
// and a gRPC channel to a closed port keeps gRPC's threads busy with reconnect attempts. So while no
// channel is up, each call first checks the port with one plain non-blocking TCP connect and answers
// UNAVAILABLE itself when nothing listens; the channel is made only once something does, and dropped
// again when the service stops answering.
class TpuMetricClient : public TpuMetricSource {
 public:
  // `address` is host:port; the channel uses gRPC local credentials, as libtpu's server requires.
  explicit TpuMetricClient(std::string address, std::chrono::milliseconds timeout = std::chrono::milliseconds(500));
  ~TpuMetricClient() override;

  absl::StatusOr<std::vector<TpuMetricPoint>> get(std::string_view metric_name) override;
  std::string_view address() const override { return address_; }
  // Names of the metrics the runtime supports.
  absl::StatusOr<std::vector<std::string>> list_supported_metrics();

 private:
  struct Stub;
  // OK when something accepts TCP connections at address_ (within timeout_), else UNAVAILABLE with why.
  absl::Status probe_port();
  // address_ resolved once (getaddrinfo reads /etc/hosts and nsswitch: not for every second's probe).
  absl::Status resolve();
  // The stub, made after a successful probe; null (UNAVAILABLE) while nothing listens.
  absl::StatusOr<Stub*> connected_stub();
  void drop_channel_if_unreachable(const absl::Status& status);

  std::string address_;
  std::vector<std::string> resolved_;  // sockaddrs, as bytes
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace podscope::agent
