#include "agent/devices/upstream_source.h"

#include <grpcpp/grpcpp.h>

#include "daemon/log.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::agent {
namespace {

// Framework traces of a long capture on a big pod are large; TF's own client accepts up to 1 GiB too.
constexpr int kMaxMessageBytes = 1 << 30;
constexpr std::string_view kXPlaneToolName = "xplane.pb";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

struct UpstreamSource::Upstream {
  std::string address;
  std::unique_ptr<tensorflow::ProfilerService::Stub> stub;
};

// One forwarded Profile in flight. The worker thread owns the RPC; close() may cancel it early through
// Terminate (the framework then answers with what it traced so far).
struct UpstreamSource::Call {
  Upstream* upstream = nullptr;
  grpc::ClientContext context;
  tensorflow::ProfileResponse response;
  grpc::Status status;
  std::thread worker;
};

UpstreamSource::UpstreamSource(std::vector<std::string> addresses, std::chrono::milliseconds grace) : grace_(grace) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  for (auto& address : addresses) {
    auto up = std::make_unique<Upstream>();
    up->stub = tensorflow::ProfilerService::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
    up->address = std::move(address);
    upstreams_.push_back(std::move(up));
  }
}

UpstreamSource::~UpstreamSource() {
  for (auto& call : calls_) call->context.TryCancel();
  join_all();
}

void UpstreamSource::join_all() {
  for (auto& call : calls_) {
    if (call->worker.joinable()) call->worker.join();
  }
}

void UpstreamSource::open(const CaptureWindow& window) {
  for (auto& call : calls_) call->context.TryCancel();  // a previous window never collected
  join_all();
  calls_.clear();
  window_ = window;
  tensorflow::ProfileRequest request = window.request;
  // Ask for the XSpace inline; servers that predate the field answer in tool_data "xplane.pb" instead.
  request.set_emit_xspace(true);
  const auto deadline = std::chrono::system_clock::now() + std::chrono::milliseconds(request.duration_ms()) + grace_;
  for (auto& upstream : upstreams_) {
    auto call = std::make_unique<Call>();
    call->upstream = upstream.get();
    call->context.set_deadline(deadline);
    Call* c = call.get();
    c->worker =
        std::thread([c, request] { c->status = c->upstream->stub->Profile(&c->context, request, &c->response); });
    calls_.push_back(std::move(call));
  }
}

void UpstreamSource::close(int64_t end_ns) {
  if (end_ns >= window_.planned_end_ns) return;  // upstreams stop on their own at the same duration
  // Ended early (Terminate, cancel, shutdown): tell each framework to stop so collect() does not wait
  // out the whole planned duration. The answer does not matter: Profile's own result reports it.
  for (auto& call : calls_) {
    tensorflow::TerminateRequest request;
    request.set_session_id(window_.request.session_id());
    tensorflow::TerminateResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    call->upstream->stub->Terminate(&context, request, &response);
  }
}

void UpstreamSource::collect(tensorflow::profiler::XSpace& space) {
  join_all();
  for (auto& call : calls_) {
    const std::string& address = call->upstream->address;
    if (!call->status.ok()) {
      space.add_warnings("upstream profiler " + address + ": Profile failed: " +
                         std::to_string(call->status.error_code()) + " " + call->status.error_message());
      continue;
    }
    tensorflow::profiler::XSpace upstream_space;
    bool found = false;
    if (call->response.has_xspace()) {
      upstream_space = std::move(*call->response.mutable_xspace());
      found = true;
    } else {
      for (const auto& tool : call->response.tool_data()) {
        if (!ends_with(tool.name(), kXPlaneToolName)) continue;
        if (!upstream_space.ParseFromString(tool.data())) {
          space.add_warnings("upstream profiler " + address + ": tool_data \"" + tool.name() +
                             "\" is not a valid XSpace (" + std::to_string(tool.data().size()) + " bytes)");
        } else {
          found = true;
        }
        break;
      }
    }
    if (!found) {
      if (!call->response.empty_trace()) {
        space.add_warnings("upstream profiler " + address + ": answered without an XSpace (no xspace, no \"" +
                           std::string(kXPlaneToolName) + "\" tool data)");
      } else {
        space.add_warnings("upstream profiler " + address + ": empty trace");
      }
      continue;
    }
    // The framework's own errors and warnings stay visible, attributed to it.
    for (const auto& e : upstream_space.errors()) space.add_warnings("upstream profiler " + address + ": " + e);
    for (const auto& w : upstream_space.warnings()) space.add_warnings("upstream profiler " + address + ": " + w);
    upstream_space.clear_errors();
    upstream_space.clear_warnings();
    xspace::merge_space(std::move(upstream_space), space);
  }
  calls_.clear();
}

}  // namespace podscope::agent
