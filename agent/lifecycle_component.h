// A part of the agent with a lifecycle of its own (the local socket server, the coordinator registration
// client): started by Agent::start() once the gRPC and metrics servers serve, stopped by Agent::shutdown()
// in reverse order, before the io_context stops.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace podscope::agent {

class LifecycleComponent {
 public:
  virtual ~LifecycleComponent() = default;
  virtual std::string_view name() const = 0;
  virtual absl::Status start() = 0;
  virtual void stop() = 0;
};

}  // namespace podscope::agent
