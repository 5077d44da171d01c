// A registration must come from the agent it registers: before the coordinator takes it, it calls the registered
// address back (podscope.v1.Agent/Ping with the registration's instance id) and takes the registration only when
// the agent there names itself with the registered host name and says the instance id is its own (which it never
// tells, so only the agent that chose it can register with it). A registration pointing at nothing, or at another
// agent, is refused before it holds a place in the registry or earns a clock-sync burst.
//
// Each source (the caller's network address) is bounded: at most kMaxCheckingPerSource of its registrations are
// being checked at once, and one whose registrations failed the check kMaxFailuresPerSource times within
// kFailureWindow is refused without a call-back until that window has passed — so a source cannot make the
// coordinator call an agent more than that many times a minute. Refusals say which bound held.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/status.h"
#include "podscope/v1/coordinator.pb.h"

namespace podscope::coordinator {

class RegistrationCheck {
 public:
  static constexpr int kMaxCheckingPerSource = 4;
  static constexpr int kMaxFailuresPerSource = 8;
  static constexpr std::chrono::seconds kFailureWindow{60};
  // The call-back's deadline: an agent answers a Ping in microseconds, a loaded one in well under this.
  static constexpr std::chrono::milliseconds kCallBackTimeout{2000};

  // Agents are called back with `credentials` (tls::channel_credentials of the coordinator's config).
  explicit RegistrationCheck(std::shared_ptr<grpc::ChannelCredentials> credentials)
      : credentials_(std::move(credentials)) {}

  // OK when the agent at request.address() answers as request.host_name() and request.instance_id(); else
  // PERMISSION_DENIED (it answers as another, or not as that instance), UNAVAILABLE (it does not answer a Ping in
  // time) or RESOURCE_EXHAUSTED (`source` is at one of its bounds; nothing was called).
  absl::Status check(const podscope::v1::RegisterRequest& request, const std::string& source, int64_t now_ns);

 private:
  struct Source {
    int checking = 0;
    std::deque<int64_t> failures_ns;  // within kFailureWindow
  };
  // The source's place, or RESOURCE_EXHAUSTED; forgets failures past the window and sources with nothing left.
  absl::Status admit(const std::string& source, int64_t now_ns);
  void done(const std::string& source, bool failed, int64_t now_ns);
  absl::Status call_back(const podscope::v1::RegisterRequest& request) const;

  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  std::mutex mu_;
  std::map<std::string, Source> sources_;
};

}  // namespace podscope::coordinator
