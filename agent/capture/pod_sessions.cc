#include "agent/capture/pod_sessions.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <memory>

#include <grpcpp/security/credentials.h>

#include "agent/capture/fanout_targets.h"
#include "daemon/local_address.h"
#include "daemon/log.h"
#include "daemon/path_within_root.h"
#include "pod_capture/agent_connection.h"

namespace podscope::agent {
namespace {

// The numeric addresses `host` resolves to, in the resolver's order.
absl::StatusOr<std::vector<std::string>> resolve(const FanoutHost& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.host.c_str(), nullptr, &hints, &found); error != 0) {
    return absl::InvalidArgumentError("NewSession: host " + host.address + " does not resolve (" + gai_strerror(error) +
                                      "); nothing was captured");
  }
  std::vector<std::string> out;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw = a->ai_family == AF_INET
                          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr)
                          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr);
    if ((a->ai_family == AF_INET || a->ai_family == AF_INET6) && inet_ntop(a->ai_family, raw, text, sizeof(text))) {
      if (std::find(out.begin(), out.end(), text) == out.end()) out.emplace_back(text);
    }
  }
  freeaddrinfo(found);
  return out;
}

// gRPC's target for numeric addresses, so nothing is resolved again between the check and the dial: the IPv4 ones
// when there are any (one scheme per target), else the IPv6 ones.
std::string numeric_target(const std::vector<std::string>& addresses, int port) {
  std::string v4, v6;
  for (const std::string& address : addresses) {
    std::string& list = address.find(':') == std::string::npos ? v4 : v6;
    list += (list.empty() ? "" : ",") + (&list == &v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
  }
  return v4.empty() ? "ipv6:" + v6 : "ipv4:" + v4;
}

// Sends the caller's identity with every call of a channel (over TLS: call credentials need a secure channel).
class OnBehalfOf final : public grpc::MetadataCredentialsPlugin {
 public:
  explicit OnBehalfOf(std::string identity) : identity_(std::move(identity)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status GetMetadata(grpc::string_ref, grpc::string_ref, const grpc::AuthContext&,
                           std::multimap<std::string, std::string>* metadata) override {
    metadata->emplace(tls::kOnBehalfOfMetadata, identity_);
    return grpc::Status::OK;
  }

 private:
  std::string identity_;
};

// The bytes of the files under `dir`.
uint64_t bytes_under(const std::filesystem::path& dir) {
  uint64_t bytes = 0;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(dir, error), end; !error && it != end; it.increment(error)) {
    std::error_code size_error;
    if (it->is_regular_file(size_error)) bytes += it->file_size(size_error);
  }
  return bytes;
}

}  // namespace

PodSessions::PodSessions(const Clock& clock, std::function<std::string()> repository_root,
                         std::function<int()> own_grpc_port, std::vector<std::string> allowed_targets, size_t max_hosts,
                         bool tls_on, std::shared_ptr<grpc::ChannelCredentials> credentials, RepositoryQuota& quota)
    : clock_(clock),
      repository_root_(std::move(repository_root)),
      own_grpc_port_(std::move(own_grpc_port)),
      allowed_targets_(std::move(allowed_targets)),
      max_hosts_(max_hosts),
      tls_on_(tls_on),
      credentials_(std::move(credentials)),
      quota_(quota) {}

absl::StatusOr<std::vector<PodSessions::Target>> PodSessions::targets(
    const tensorflow::NewProfileSessionRequest& request, const tls::PeerCertificate& caller) const {
  if (request.hosts().empty()) return absl::InvalidArgumentError("NewSession: hosts is empty");
  if (static_cast<size_t>(request.hosts().size()) > max_hosts_) {
    return absl::ResourceExhaustedError("NewSession: " + std::to_string(request.hosts().size()) +
                                        " hosts, more than this agent's max_fanout_hosts (" +
                                        std::to_string(max_hosts_) + "); nothing was captured");
  }
  std::vector<FanoutHost> hosts;
  for (const std::string& text : request.hosts()) {
    absl::StatusOr<FanoutHost> host = parse_fanout_host(text, own_grpc_port_());
    if (!host.ok()) return host.status();
    hosts.push_back(std::move(*host));
  }
  const FanoutTargets allowed(allowed_targets_, own_grpc_port_());
  // Over TLS a caller without a certificate could call no other agent itself: it may capture only this one.
  const bool only_this_agent = tls_on_ && !caller.over_tls;
  std::vector<Target> out;
  for (const FanoutHost& host : hosts) {
    absl::StatusOr<std::vector<std::string>> resolved = resolve(host);
    if (!resolved.ok()) return resolved.status();
    const std::vector<std::string> addresses = allowed.allowed_addresses(host, *resolved);
    if (addresses.empty()) {
      return absl::PermissionDeniedError("NewSession: host " + host.address + " is not in this agent's " +
                                         "allowed_fanout_targets (" + allowed.describe() + "); nothing was captured");
    }
    if (only_this_agent &&
        !(host.port == own_grpc_port_() && std::all_of(addresses.begin(), addresses.end(), is_this_host))) {
      return absl::PermissionDeniedError(
          "NewSession: host " + host.address + " is another agent, and a caller without a certificate (" +
          tls::kLocalPlaintextIdentity + ") could not call it itself; nothing was captured");
    }
    out.push_back({host.address, numeric_target(addresses, host.port)});
  }
  return out;
}

std::shared_ptr<grpc::ChannelCredentials> PodSessions::credentials_for(const tls::PeerCertificate& caller) const {
  if (!tls_on_ || !caller.over_tls) return credentials_;
  return grpc::CompositeChannelCredentials(
      credentials_, grpc::MetadataCredentialsFromPlugin(std::make_unique<OnBehalfOf>(tls::forwarded_identity(caller))));
}

absl::StatusOr<std::string> PodSessions::run_directory(const tensorflow::NewProfileSessionRequest& request,
                                                       const std::string& session_id) const {
  const std::string root = repository_root_();
  if (!root.empty() && !is_plain_path_component(session_id)) {
    return absl::InvalidArgumentError("NewSession: session_id '" + session_id + "' is not a plain name");
  }
  absl::StatusOr<std::filesystem::path> repository = confine_to_root(
      root, request.repository_root(),
      {.no_root = "this agent has no repository_root, so it writes no captures: start it with --repository_root DIR "
                  "(or `repository_root: DIR` in its config) with TensorBoard's logdir inside DIR",
       .outside_code = absl::StatusCode::kInvalidArgument,
       .outside_prefix = "NewSession: repository_root is outside the agent's --repository_root: "});
  if (!repository.ok()) return repository.status();
  return (*repository / session_id).string();
}

absl::StatusOr<pod_capture::PodRunOutcome> PodSessions::run(const tensorflow::NewProfileSessionRequest& request,
                                                            const tls::PeerCertificate& caller) {
  absl::StatusOr<std::vector<Target>> targets = this->targets(request, caller);
  if (!targets.ok()) return targets.status();
  pod_capture::CaptureSpec spec = pod_capture::capture_spec_from(request, clock_.now_ns());
  absl::StatusOr<std::string> run_dir = run_directory(request, spec.session_id);
  if (!run_dir.ok()) return run_dir.status();

  std::unique_lock lock(running_, std::try_to_lock);
  if (!lock.owns_lock()) return absl::AlreadyExistsError("a NewSession is already running on this agent");
  if (stopping_.cancelled()) return absl::UnavailableError("the agent is shutting down; no new NewSession");
  spec.cancellation = &stopping_;
  absl::StatusOr<RepositoryQuota::PlannedWrite> admitted = quota_.admit(*run_dir);
  if (!admitted.ok()) return admitted.status();
  std::vector<std::unique_ptr<pod_capture::AgentConnection>> connections;
  std::vector<pod_capture::PodAgent> agents;
  const std::shared_ptr<grpc::ChannelCredentials> credentials = credentials_for(caller);
  for (const Target& target : *targets) {
    connections.push_back(pod_capture::connect_agent(target.address, credentials, target.dial));
    agents.push_back({connections.back().get(), "", 0});
  }
  absl::StatusOr<pod_capture::PodRunOutcome> outcome =
      pod_capture::run_pod(agents, spec, *run_dir, clock_, [](const std::string&) {});
  if (outcome.ok()) {
    quota_.charge(*admitted, outcome->run_dir, bytes_under(outcome->run_dir));
    PODSCOPE_LOG(kInfo) << "NewSession " << spec.session_id << " of " << agents.size() << " host(s) into "
                        << outcome->run_dir.string() << ": exit code " << outcome->exit_code();
  }
  return outcome;
}

}  // namespace podscope::agent
