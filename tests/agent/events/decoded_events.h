// A client's kept events decoded whole, for tests that look at them one by one (the agent decodes them a plane at a
// time).
#pragma once

#include <vector>

#include "agent/events/compact_event_store.h"

namespace podscope::testing {

inline std::vector<agent::HeldEvent> decoded(const agent::HeldClientEvents& held) {
  std::vector<agent::HeldEvent> events;
  held.for_each([&events](const agent::HeldEvent& e, agent::HeldRecord) { events.push_back(e); });
  return events;
}

}  // namespace podscope::testing
