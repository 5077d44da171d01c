// A SampleSink that keeps everything it is given, for collector tests.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/collectors/collector.h"

namespace podscope::agent::testing {

class RecordingSink : public SampleSink {
 public:
  struct Sample {
    int64_t time_ns;
    double value;
  };

  SeriesId declare(const SeriesSpec& spec) override {
    std::lock_guard lock(mu_);
    specs_.push_back(spec);
    samples_.emplace_back();
    return static_cast<SeriesId>(specs_.size() - 1);
  }
  void record(SeriesId id, int64_t time_ns, double value) override {
    std::lock_guard lock(mu_);
    samples_.at(id).push_back({time_ns, value});
  }

  // The spec of the series with this metric whose labels include label=value.
  std::optional<SeriesSpec> find(const std::string& metric, const std::string& label, const std::string& value) const {
    std::lock_guard lock(mu_);
    if (auto i = index_of(metric, label, value)) return specs_[*i];
    return std::nullopt;
  }
  // The last value recorded for that series.
  std::optional<double> last(const std::string& metric, const std::string& label, const std::string& value) const {
    std::lock_guard lock(mu_);
    auto i = index_of(metric, label, value);
    if (!i || samples_[*i].empty()) return std::nullopt;
    return samples_[*i].back().value;
  }
  size_t series_count() const {
    std::lock_guard lock(mu_);
    return specs_.size();
  }

 private:
  std::optional<size_t> index_of(const std::string& metric, const std::string& label, const std::string& value) const {
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (specs_[i].metric != metric) continue;
      for (const auto& [k, v] : specs_[i].labels) {
        if (k == label && v == value) return i;
      }
    }
    return std::nullopt;
  }

  mutable std::mutex mu_;
  std::vector<SeriesSpec> specs_;
  std::vector<std::vector<Sample>> samples_;
};

}  // namespace podscope::agent::testing
