#include "agent/capture/upstream_source.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "agent/capture/parsed_size.h"
#include "agent/capture/upstream_profile_call.h"
#include "daemon/log.h"
#include "proto/xspace/utf8.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::agent {
namespace {

constexpr std::string_view kXPlaneToolName = "xplane.pb";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// What parsing `bytes` as a `type` would hold at its peak beside them, or an error when they are no such message.
absl::StatusOr<size_t> parse_cost(std::string_view bytes, const google::protobuf::Descriptor& type) {
  absl::StatusOr<ParsedSize> size = parsed_size_bound(bytes, type);
  if (!size.ok()) return size.status();
  return size->peak_bytes();
}

std::string mib(size_t bytes) { return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB"; }

// The XSpace in an upstream's answer: inline (`xspace`) or, from servers that predate it, tool data "xplane.pb".
// What is wrong with the answer, and how many of its strings had to be repaired, become warnings in `space`; what
// would not fit `share_bytes` parsed is refused through `refuse(what)`. `bytes` are freed once parsed.
std::optional<tensorflow::profiler::XSpace> answered_space(std::string bytes, size_t share_bytes,
                                                           const std::string& who, tensorflow::profiler::XSpace& space,
                                                           const std::function<void(const std::string&)>& refuse) {
  const absl::StatusOr<size_t> cost = parse_cost(bytes, *tensorflow::ProfileResponse::descriptor());
  if (!cost.ok()) {
    space.add_warnings(who + "Profile answer dropped: " + std::string(cost.status().message()));
    return std::nullopt;
  }
  if (bytes.size() + *cost > share_bytes) {
    refuse("its answer of " + mib(bytes.size()) + " would hold " + mib(bytes.size() + *cost) + " parsed");
    return std::nullopt;
  }
  tensorflow::ProfileResponse response;
  const absl::StatusOr<int> repaired = xspace::parse_replacing_invalid_utf8(bytes, response);
  std::string().swap(bytes);
  if (!repaired.ok()) {
    space.add_warnings(who + "Profile answer dropped: " + std::string(repaired.status().message()));
    return std::nullopt;
  }
  int repaired_strings = *repaired;
  tensorflow::profiler::XSpace upstream_space;
  if (response.has_xspace()) {
    upstream_space = std::move(*response.mutable_xspace());
  } else {
    const auto tool = std::find_if(response.tool_data().begin(), response.tool_data().end(),
                                   [](const auto& t) { return ends_with(t.name(), kXPlaneToolName); });
    if (tool == response.tool_data().end()) {
      if (response.empty_trace()) {
        space.add_warnings(who + "empty trace");
      } else {
        space.add_warnings(who + "answered without an XSpace (no xspace, no \"" + std::string(kXPlaneToolName) +
                           "\" tool data)");
      }
      return std::nullopt;
    }
    const absl::StatusOr<size_t> tool_cost = parse_cost(tool->data(), *tensorflow::profiler::XSpace::descriptor());
    if (tool_cost.ok() && response.SpaceUsedLong() + *tool_cost > share_bytes) {
      refuse("its tool data of " + mib(tool->data().size()) + " would hold " +
             mib(response.SpaceUsedLong() + *tool_cost) + " parsed");
      return std::nullopt;
    }
    const absl::StatusOr<int> tool_repaired = xspace::parse_replacing_invalid_utf8(tool->data(), upstream_space);
    if (!tool_repaired.ok()) {
      space.add_warnings(who + "tool_data \"" + tool->name() +
                         "\" is not a valid XSpace: " + std::string(tool_repaired.status().message()));
      return std::nullopt;
    }
    repaired_strings += *tool_repaired;
  }
  if (repaired_strings > 0) {
    space.add_warnings(who + std::to_string(repaired_strings) +
                       " strings held invalid UTF-8; invalid sequences replaced by U+FFFD");
  }
  return upstream_space;
}

// TSL's profiler session writes its times relative to the session's start (NormalizeTimestamps, TensorFlow 2.21
// and JAX 0.10 both do), which it keeps as `profile_start_time` on its "Task Environment" plane. The delta that
// puts such a space back on the Unix epoch: that start when the lines hold relative times (below half of it),
// else 0 (a server that wrote epoch times, or no start recorded).
constexpr std::string_view kTaskEnvironmentPlaneName = "Task Environment";
constexpr std::string_view kProfileStartTimeStat = "profile_start_time";

int64_t relative_times_base_ns(const tensorflow::profiler::XSpace& space) {
  const tensorflow::profiler::XPlane* environment = xspace::find_plane(space, kTaskEnvironmentPlaneName);
  if (environment == nullptr) return 0;
  const std::optional<int64_t> start = xspace::XPlaneReader(*environment).int_stat(kProfileStartTimeStat);
  if (!start || *start <= 0) return 0;
  for (const auto& plane : space.planes()) {
    for (const auto& line : plane.lines()) {
      if (line.timestamp_ns() >= *start / 2) return 0;
    }
  }
  return *start;
}

}  // namespace

struct UpstreamSource::Upstream {
  std::string address;
  std::unique_ptr<tensorflow::ProfilerService::Stub> stub;  // Terminate
};

// One forwarded Profile in flight (call_upstream_profile). The worker thread owns the call; close() may end it early
// through Terminate (the framework then answers with what it traced so far), a new window or the source's end
// cancels it.
struct UpstreamSource::Call {
  Upstream* upstream = nullptr;
  std::atomic<bool> cancelled{false};
  UpstreamAnswer answer;
  std::thread worker;
};

UpstreamSource::UpstreamSource(std::vector<std::string> addresses, const Clock& clock, AnnouncedServers announced,
                               std::function<void()> on_refused)
    : configured_(std::move(addresses)),
      announced_(std::move(announced)),
      on_refused_(std::move(on_refused)),
      clock_(clock) {}

std::unique_ptr<UpstreamSource::Upstream> UpstreamSource::connect(const std::string& address) const {
  auto up = std::make_unique<Upstream>();
  up->stub = tensorflow::ProfilerService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  up->address = address;
  return up;
}

std::vector<std::string> UpstreamSource::servers() const {
  std::vector<std::string> wanted = configured_;
  if (announced_) {
    for (std::string& address : announced_()) {
      if (std::find(wanted.begin(), wanted.end(), address) == wanted.end()) wanted.push_back(std::move(address));
    }
  }
  return wanted;
}

std::vector<UpstreamSource::Upstream*> UpstreamSource::upstreams_for_window() {
  const std::vector<std::string> wanted = servers();
  // A server no longer listed (its process ended) is forgotten with its channel.
  std::erase_if(upstreams_, [&](const std::unique_ptr<Upstream>& up) {
    return std::find(wanted.begin(), wanted.end(), up->address) == wanted.end();
  });
  std::vector<Upstream*> out;
  for (const std::string& address : wanted) {
    auto it = std::find_if(upstreams_.begin(), upstreams_.end(),
                           [&](const std::unique_ptr<Upstream>& up) { return up->address == address; });
    if (it == upstreams_.end()) {
      upstreams_.push_back(connect(address));
      it = std::prev(upstreams_.end());
    }
    out.push_back(it->get());
  }
  return out;
}

UpstreamSource::~UpstreamSource() {
  for (auto& call : calls_) call->cancelled = true;
  join_all();
}

void UpstreamSource::join_all() {
  for (auto& call : calls_) {
    if (call->worker.joinable()) call->worker.join();
  }
}

void UpstreamSource::plan(const CaptureWindow& window) {
  reserved_bytes_ = servers().empty() ? 0 : window.memory->reserve(window.memory->limit_bytes() / 2);
  window_ = window;
}

void UpstreamSource::open(const CaptureWindow& window) {
  for (auto& call : calls_) call->cancelled = true;  // a previous window never collected
  join_all();
  calls_.clear();
  // A window that was not planned here, or planned before any server was listed, takes half of what is left.
  if (window.memory != window_.memory) reserved_bytes_ = 0;
  if (reserved_bytes_ == 0 && !servers().empty()) {
    reserved_bytes_ = window.memory->reserve(window.memory->unreserved_bytes() / 2);
  }
  window_ = window;
  tensorflow::ProfileRequest request = window.request;
  // Ask for the XSpace inline; servers that predate the field answer in tool_data "xplane.pb" instead.
  request.set_emit_xspace(true);
  const std::chrono::milliseconds duration(request.duration_ms());
  const auto deadline = std::chrono::system_clock::now() + duration + std::max(duration, kMinAnswerWait);
  const size_t listed = std::max<size_t>(servers().size(), 1);
  share_bytes_ = reserved_bytes_ / listed;
  for (Upstream* upstream : upstreams_for_window()) {
    auto call = std::make_unique<Call>();
    call->upstream = upstream;
    Call* c = call.get();
    c->worker = std::thread([c, request, share = share_bytes_, deadline] {
      c->answer = call_upstream_profile(c->upstream->address, request, share, deadline, c->cancelled);
    });
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

void UpstreamSource::collect(CaptureSpace& out) {
  tensorflow::profiler::XSpace& space = out.space();
  join_all();
  for (auto& call : calls_) merge_answer(*call, space);
  calls_.clear();
}

void UpstreamSource::refuse(const std::string& who, const std::string& what, tensorflow::profiler::XSpace& space) {
  const std::string bound = "its share of the capture's memory, " + mib(share_bytes_) + " (half of " +
                            "capture_memory_limit_mb=" + std::to_string(window_.memory_limit_bytes >> 20) +
                            " shared by " + std::to_string(calls_.size()) + " framework server(s))";
  space.add_warnings(who + "dropped: " + what + ", more than " + bound);
  PODSCOPE_LOG(kWarning) << who << "answer dropped: " << what << ", more than " << bound;
  if (on_refused_) on_refused_();
}

void UpstreamSource::merge_answer(Call& call, tensorflow::profiler::XSpace& space) {
  const std::string who = "upstream profiler " + call.upstream->address + ": ";
  UpstreamAnswer& answer = call.answer;
  if (answer.outcome == UpstreamAnswer::Outcome::kTooLarge) {
    refuse(who, "its answer of " + mib(answer.declared_bytes) + " (not read) is larger", space);
    return;
  }
  if (answer.outcome == UpstreamAnswer::Outcome::kFailed) {
    space.add_warnings(who + "Profile failed: " + answer.error);
    return;
  }
  std::optional<tensorflow::profiler::XSpace> upstream_space = answered_space(
      std::move(answer.bytes), share_bytes_, who, space, [&](const std::string& what) { refuse(who, what, space); });
  if (!upstream_space) return;
  // The framework's own errors and warnings stay visible, attributed to it.
  for (const auto& e : upstream_space->errors()) space.add_warnings(who + e);
  for (const auto& w : upstream_space->warnings()) space.add_warnings(who + w);
  upstream_space->clear_errors();
  upstream_space->clear_warnings();
  // On the agent's clock, as everything else in the capture: the epoch, then the agent's offset.
  const int64_t delta = relative_times_base_ns(*upstream_space) + clock_.from_system_ns(0);
  if (delta != 0) xspace::shift_timestamps(*upstream_space, delta);
  xspace::merge_space(std::move(*upstream_space), space);
}

}  // namespace podscope::agent
