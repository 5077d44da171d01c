#include "agent/collectors/proc_file_collector.h"

namespace podscope::agent {

void ProcFileCollector::sample(int64_t now_ns, SampleSink& sink) {
  std::string_view text;
  if (absl::Status s = file_.read(text); !s.ok()) {
    state_.set(absl::IsNotFound(s) ? CollectorState::State::kUnavailable : CollectorState::State::kDegraded,
               std::string(s.message()));
    return;
  }
  if (absl::Status s = record(text, now_ns, sink); !s.ok()) {
    state_.set(CollectorState::State::kDegraded, std::string(s.message()));
    return;
  }
  state_.set(CollectorState::State::kOk);
}

}  // namespace podscope::agent
