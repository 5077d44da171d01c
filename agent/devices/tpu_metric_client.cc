#include "agent/devices/tpu_metric_client.h"

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "daemon/grpc_status.h"
#include "tpu/runtime_metric_service.grpc.pb.h"

namespace podscope::agent {
namespace {

namespace rt = ::tpu::monitoring::runtime;

// The device a metric value belongs to: the runtime labels each value with an attribute whose value is
// the device id (an int, or a string holding one in some runtime versions).
int64_t device_id_of(const rt::Metric& metric, int64_t fallback) {
  const auto& value = metric.attribute().value();
  switch (value.attr_case()) {
    case rt::AttrValue::kIntAttr: return value.int_attr();
    case rt::AttrValue::kStringAttr: {
      char* end = nullptr;
      const long long id = std::strtoll(value.string_attr().c_str(), &end, 10);
      return end != value.string_attr().c_str() ? id : fallback;
    }
    default: return fallback;
  }
}

std::optional<double> numeric_value(const rt::Metric& metric) {
  if (metric.has_gauge()) {
    const auto& g = metric.gauge();
    switch (g.value_case()) {
      case rt::Gauge::kAsDouble: return g.as_double();
      case rt::Gauge::kAsInt: return static_cast<double>(g.as_int());
      case rt::Gauge::kAsBool: return g.as_bool() ? 1.0 : 0.0;
      default: return std::nullopt;  // as_string carries no number
    }
  }
  if (metric.has_counter()) {
    const auto& c = metric.counter();
    switch (c.value_case()) {
      case rt::Counter::kAsDouble: return c.as_double();
      case rt::Counter::kAsInt: return static_cast<double>(c.as_int());
      default: return std::nullopt;
    }
  }
  return std::nullopt;
}

// One non-blocking connect to `addr`, waiting at most `timeout` for it to complete. 0 or an errno.
int try_connect(const std::string& addr, std::chrono::milliseconds timeout) {
  const auto* sa = reinterpret_cast<const sockaddr*>(addr.data());
  const int fd = ::socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int error = 0;
  if (::connect(fd, sa, static_cast<socklen_t>(addr.size())) != 0) {
    error = errno;
    if (error == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      socklen_t length = sizeof(error);
      if (ready <= 0) {
        error = ETIMEDOUT;
      } else if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) {
        error = errno;
      }
    }
  }
  ::close(fd);
  return error;
}

}  // namespace

struct TpuMetricClient::Stub {
  std::unique_ptr<rt::RuntimeMetricService::Stub> stub;
};

TpuMetricClient::TpuMetricClient(std::string address, std::chrono::milliseconds timeout)
    : address_(std::move(address)), timeout_(timeout), stub_(std::make_unique<Stub>()) {}

TpuMetricClient::~TpuMetricClient() = default;

absl::Status TpuMetricClient::resolve() {
  if (!resolved_.empty()) return absl::OkStatus();
  const size_t colon = address_.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == address_.size()) {
    return absl::InvalidArgumentError("libtpu metric service address '" + address_ + "' is not host:port");
  }
  std::string host = address_.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string port = address_.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int r = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); r != 0) {
    return absl::UnavailableError("libtpu metric service at " + address_ + ": cannot resolve: " + gai_strerror(r));
  }
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    resolved_.emplace_back(reinterpret_cast<const char*>(a->ai_addr), a->ai_addrlen);
  }
  ::freeaddrinfo(found);
  return absl::OkStatus();
}

absl::Status TpuMetricClient::probe_port() {
  if (absl::Status s = resolve(); !s.ok()) return s;
  int error = ECONNREFUSED;
  for (const std::string& addr : resolved_) {
    if ((error = try_connect(addr, timeout_)) == 0) return absl::OkStatus();
  }
  return absl::UnavailableError("libtpu metric service at " + address_ +
                                ": nothing listening (connect: " + std::strerror(error) + ")");
}

absl::StatusOr<TpuMetricClient::Stub*> TpuMetricClient::connected_stub() {
  if (stub_->stub != nullptr) return stub_.get();
  if (absl::Status listening = probe_port(); !listening.ok()) return listening;
  grpc::ChannelArguments args;
  // The runtime may restart under a live channel: reconnect within a sampling period instead of gRPC's
  // default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  stub_->stub = rt::RuntimeMetricService::NewStub(
      grpc::CreateCustomChannel(address_, grpc::experimental::LocalCredentials(LOCAL_TCP), args));
  return stub_.get();
}

void TpuMetricClient::drop_channel_if_unreachable(const absl::Status& status) {
  // Back to plain connects: a channel left to a vanished server would keep reconnecting in the background.
  if (absl::IsUnavailable(status)) stub_->stub.reset();
}

absl::StatusOr<std::vector<TpuMetricPoint>> TpuMetricClient::get(std::string_view metric_name) {
  absl::StatusOr<Stub*> stub = connected_stub();
  if (!stub.ok()) return stub.status();
  rt::MetricRequest request;
  request.set_metric_name(std::string(metric_name));
  rt::MetricResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  const grpc::Status status = (*stub)->stub->GetRuntimeMetric(&context, request, &response);
  if (!status.ok()) {
    absl::Status error =
        to_absl_status(status, "metric " + std::string(metric_name) + " from libtpu metric service at " + address_);
    drop_channel_if_unreachable(error);
    return error;
  }
  std::vector<TpuMetricPoint> points;
  points.reserve(response.metric().metrics_size());
  int64_t index = 0;
  for (const auto& metric : response.metric().metrics()) {
    if (auto value = numeric_value(metric)) points.push_back({device_id_of(metric, index), *value});
    ++index;
  }
  return points;
}

absl::StatusOr<std::vector<std::string>> TpuMetricClient::list_supported_metrics() {
  absl::StatusOr<Stub*> stub = connected_stub();
  if (!stub.ok()) return stub.status();
  rt::ListSupportedMetricsRequest request;
  rt::ListSupportedMetricsResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  const grpc::Status status = (*stub)->stub->ListSupportedMetrics(&context, request, &response);
  if (!status.ok()) {
    absl::Status error = to_absl_status(status, "supported metrics from libtpu metric service at " + address_);
    drop_channel_if_unreachable(error);
    return error;
  }
  std::vector<std::string> names;
  for (const auto& m : response.supported_metric()) names.push_back(m.metric_name());
  return names;
}

}  // namespace podscope::agent
