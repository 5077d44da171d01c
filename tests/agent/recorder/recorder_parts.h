// A flight recorder assembled as the agent assembles it, from real parts: the agent's clock, a client registry,
// the series store it looks back into (empty: no collector samples in these tests) and a Prometheus registry; and
// the registry's text, which is how these tests read the recorder's counters.
#pragma once

#include <memory>
#include <string>

#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "agent/capture/host_series_source.h"
#include "agent/local/client_registry.h"
#include "agent/recorder/flight_recorder.h"
#include "agent/series/series_store.h"
#include "daemon/clock.h"

namespace podscope::agent::testing {

struct RecorderParts {
  const std::string host_name = "h";
  prometheus::Registry metrics;
  Clock clock;
  std::shared_ptr<ClientRegistry> clients = std::make_shared<ClientRegistry>();
  SeriesStore series{metrics, host_name, 64};
  FlightRecorder recorder{clients,
                          clock,
                          host_name,
                          std::make_unique<HostSeriesSource>(series, HostDescription{host_name, 4, int64_t{1} << 30},
                                                             std::vector<const Collector*>{}),
                          [this] { return clock.now_ns(); },
                          metrics};

  // Every series of the registry in Prometheus' text format, one line each (`name{labels} value`).
  std::string metrics_text() { return prometheus::TextSerializer().Serialize(metrics.Collect()); }
};

}  // namespace podscope::agent::testing
