#include "agent/capture/host_series_source.h"

#include <unistd.h>

#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::agent {

HostDescription HostDescription::of_this_host(std::string host_name) {
  HostDescription d;
  d.host_name = std::move(host_name);
  d.core_count = sysconf(_SC_NPROCESSORS_ONLN);
  d.memory_size_bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGESIZE);
  return d;
}

HostSeriesSource::HostSeriesSource(const SeriesStore& series, HostDescription host,
                                   std::vector<const Collector*> collectors)
    : series_(series), host_(std::move(host)), collectors_(std::move(collectors)) {}

void HostSeriesSource::open(const CaptureWindow& window) {
  start_ns_ = window.start_ns;
  end_ns_ = window.planned_end_ns;
}

void HostSeriesSource::close(int64_t end_ns) { end_ns_ = end_ns; }

void HostSeriesSource::collect(CaptureSpace& out) {
  tensorflow::profiler::XSpace& space = out.space();
  xspace::XPlaneBuilder host_plane(xspace::find_or_add_plane(space, xspace::kHostPlaneName));
  host_plane.stats()
      .add(xspace::kCoreCountStat, host_.core_count)
      .add(xspace::kMemorySizeStat, host_.memory_size_bytes)
      .add(xspace::kHostNameStat, std::string_view(host_.host_name));

  std::vector<Sample> samples;
  for (SeriesId id = 0; id < series_.size(); ++id) {
    const SeriesSpec& spec = series_.spec(id);
    if (spec.track.empty() || spec.plane.empty()) continue;
    samples.clear();
    series_.window(id, start_ns_, end_ns_, samples);
    if (samples.empty()) continue;
    xspace::XPlaneBuilder plane(xspace::find_or_add_plane(space, spec.plane));
    xspace::XLineBuilder line = plane.line_named(xspace::kCountersLineName);
    if (spec.kind == SeriesSpec::Kind::kGauge) {
      for (const Sample& s : samples) line.add_counter(spec.track, s.time_ns, s.value);
      continue;
    }
    // A running total is shown as its rate between consecutive samples, stamped at the later one.
    for (size_t i = 1; i < samples.size(); ++i) {
      const double seconds = static_cast<double>(samples[i].time_ns - samples[i - 1].time_ns) * 1e-9;
      const double delta = samples[i].value - samples[i - 1].value;
      if (seconds > 0 && delta >= 0) line.add_counter(spec.track, samples[i].time_ns, delta / seconds);
    }
  }

  for (const Collector* c : collectors_) {
    const CollectorState state = c->status();
    if (state.state == CollectorState::State::kOk) continue;
    space.add_warnings("collector " + std::string(c->name()) + " " + describe(state));
  }
}

}  // namespace podscope::agent
