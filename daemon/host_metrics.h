// The daemons' Prometheus metrics, each family labelled with the host it runs on (host="<host_name>"), so that one
// Prometheus scraping a fleet tells its hosts apart.
#pragma once

#include <string>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/registry.h>

namespace podscope {

// A family whose series add labels of their own (a reason, a core): Metric is prometheus::Counter, Gauge, Histogram.
template <typename Metric>
prometheus::Family<Metric>& host_family(prometheus::Registry& registry, const std::string& host_name,
                                        const std::string& name, const std::string& help) {
  return prometheus::detail::Builder<Metric>().Name(name).Help(help).Labels({{"host", host_name}}).Register(registry);
}

// A family of one series.
inline prometheus::Counter& host_counter(prometheus::Registry& registry, const std::string& host_name,
                                         const std::string& name, const std::string& help) {
  return host_family<prometheus::Counter>(registry, host_name, name, help).Add({});
}
inline prometheus::Gauge& host_gauge(prometheus::Registry& registry, const std::string& host_name,
                                     const std::string& name, const std::string& help) {
  return host_family<prometheus::Gauge>(registry, host_name, name, help).Add({});
}

}  // namespace podscope
