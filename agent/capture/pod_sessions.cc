#include "agent/capture/pod_sessions.h"

#include <cctype>
#include <memory>

#include "agent/capture/fanout_targets.h"
#include "daemon/log.h"
#include "daemon/path_within_root.h"
#include "pod_capture/agent_connection.h"

namespace podscope::agent {
namespace {

// Host names, IPv4 and bracketed IPv6 addresses, and a port: nothing that could make a file name leave its
// directory once the address becomes a host file stem.
bool is_plain_address(std::string_view address) {
  if (address.empty()) return false;
  for (char c : address) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string_view(".-_:[]").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

}  // namespace

PodSessions::PodSessions(const Clock& clock, std::function<std::string()> repository_root,
                         std::function<int()> own_grpc_port, std::vector<std::string> allowed_targets,
                         std::shared_ptr<grpc::ChannelCredentials> credentials)
    : clock_(clock),
      repository_root_(std::move(repository_root)),
      own_grpc_port_(std::move(own_grpc_port)),
      allowed_targets_(std::move(allowed_targets)),
      credentials_(std::move(credentials)) {}

absl::StatusOr<std::vector<std::string>> PodSessions::target_addresses(
    const tensorflow::NewProfileSessionRequest& request) const {
  if (request.hosts().empty()) return absl::InvalidArgumentError("NewSession: hosts is empty");
  const FanoutTargets allowed(allowed_targets_, own_grpc_port_());
  std::vector<std::string> addresses;
  for (const std::string& host : request.hosts()) {
    std::string address = pod_capture::strip_grpc_scheme(host);
    if (!is_plain_address(address)) {
      return absl::InvalidArgumentError("NewSession: host '" + host + "' is not a host:port address");
    }
    if (address.find(':') == std::string::npos) address.append(":").append(std::to_string(own_grpc_port_()));
    if (!allowed.allows(address)) {
      return absl::PermissionDeniedError("NewSession: host " + address +
                                         " is not in this agent's allowed_fanout_targets (" + allowed.describe() +
                                         "); nothing was captured");
    }
    addresses.push_back(std::move(address));
  }
  return addresses;
}

absl::StatusOr<std::string> PodSessions::run_directory(const tensorflow::NewProfileSessionRequest& request,
                                                       const std::string& session_id) const {
  const std::string root = repository_root_();
  if (root.empty()) {
    return absl::FailedPreconditionError(
        "this agent has no repository_root, so it writes no captures: start it with --repository_root DIR (or "
        "`repository_root: DIR` in its config) with TensorBoard's logdir inside DIR");
  }
  if (!is_plain_path_component(session_id)) {
    return absl::InvalidArgumentError("NewSession: session_id '" + session_id + "' is not a plain name");
  }
  absl::StatusOr<std::filesystem::path> repository = resolve_within_root(root, request.repository_root());
  if (absl::IsPermissionDenied(repository.status())) {
    return absl::InvalidArgumentError("NewSession: repository_root is outside the agent's --repository_root: " +
                                      std::string(repository.status().message()));
  }
  if (!repository.ok()) return repository.status();
  return (*repository / session_id).string();
}

absl::StatusOr<pod_capture::PodRunOutcome> PodSessions::run(const tensorflow::NewProfileSessionRequest& request) {
  absl::StatusOr<std::vector<std::string>> addresses = target_addresses(request);
  if (!addresses.ok()) return addresses.status();
  pod_capture::CaptureSpec spec = pod_capture::capture_spec_from(request, clock_.now_ns());
  absl::StatusOr<std::string> run_dir = run_directory(request, spec.session_id);
  if (!run_dir.ok()) return run_dir.status();

  std::unique_lock lock(running_, std::try_to_lock);
  if (!lock.owns_lock()) return absl::AlreadyExistsError("a NewSession is already running on this agent");
  std::vector<std::unique_ptr<pod_capture::AgentConnection>> connections;
  std::vector<pod_capture::PodAgent> agents;
  for (const std::string& address : *addresses) {
    connections.push_back(pod_capture::connect_agent(address, credentials_));
    agents.push_back({connections.back().get(), "", 0});
  }
  absl::StatusOr<pod_capture::PodRunOutcome> outcome =
      pod_capture::run_pod(agents, spec, *run_dir, clock_, [](const std::string&) {});
  if (outcome.ok()) {
    PODSCOPE_LOG(kInfo) << "NewSession " << spec.session_id << " of " << agents.size() << " host(s) into "
                        << outcome->run_dir.string() << ": exit code " << outcome->exit_code();
  }
  return outcome;
}

}  // namespace podscope::agent
