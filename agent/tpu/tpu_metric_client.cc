#include "agent/tpu/tpu_metric_client.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/credentials.h>

#include <cstdlib>
#include <optional>

#include "tpu/runtime_metric_service.grpc.pb.h"

namespace podscope::agent {
namespace {

namespace rt = ::tpu::monitoring::runtime;

absl::Status to_absl(const grpc::Status& status, std::string_view what, std::string_view address) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      std::string(what) + " from libtpu metric service at " + std::string(address) + ": " +
                          status.error_message());
}

// The device a metric value belongs to: the runtime labels each value with an attribute whose value is
// the device id (an int, or a string holding one in some runtime versions).
int64_t device_id_of(const rt::Metric& metric, int64_t fallback) {
  const auto& value = metric.attribute().value();
  switch (value.attr_case()) {
    case rt::AttrValue::kIntAttr:
      return value.int_attr();
    case rt::AttrValue::kStringAttr: {
      char* end = nullptr;
      const long long id = std::strtoll(value.string_attr().c_str(), &end, 10);
      return end != value.string_attr().c_str() ? id : fallback;
    }
    default:
      return fallback;
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

}  // namespace

struct TpuMetricClient::Stub {
  std::unique_ptr<rt::RuntimeMetricService::Stub> stub;
};

TpuMetricClient::TpuMetricClient(std::string address, std::chrono::milliseconds timeout)
    : address_(std::move(address)), timeout_(timeout), stub_(std::make_unique<Stub>()) {
  grpc::ChannelArguments args;
  // libtpu usually comes up after the agent: reconnect within a sampling period instead of gRPC's
  // default backoff of up to two minutes.
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  stub_->stub = rt::RuntimeMetricService::NewStub(grpc::CreateCustomChannel(
      address_, grpc::experimental::LocalCredentials(LOCAL_TCP), args));
}

TpuMetricClient::~TpuMetricClient() = default;

absl::StatusOr<std::vector<TpuMetricPoint>> TpuMetricClient::get(std::string_view metric_name) {
  rt::MetricRequest request;
  request.set_metric_name(std::string(metric_name));
  rt::MetricResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  const grpc::Status status = stub_->stub->GetRuntimeMetric(&context, request, &response);
  if (!status.ok()) return to_absl(status, "metric " + std::string(metric_name), address_);
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
  rt::ListSupportedMetricsRequest request;
  rt::ListSupportedMetricsResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout_);
  const grpc::Status status = stub_->stub->ListSupportedMetrics(&context, request, &response);
  if (!status.ok()) return to_absl(status, "supported metrics", address_);
  std::vector<std::string> names;
  for (const auto& m : response.supported_metric()) names.push_back(m.metric_name());
  return names;
}

}  // namespace podscope::agent
