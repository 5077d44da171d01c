// A part of a daemon with a lifecycle of its own (the agent's local socket server, its coordinator registration
// client, its flight recorder): started once the gRPC and metrics servers serve, stopped in reverse order
// before the daemon's event loop stops.
#pragma once

#include <string_view>

#include "absl/status/status.h"

namespace podscope {

class LifecycleComponent {
 public:
  virtual ~LifecycleComponent() = default;
  virtual std::string_view name() const = 0;
  virtual absl::Status start() = 0;
  virtual void stop() = 0;
};

}  // namespace podscope
