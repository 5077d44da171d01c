// A SampleSink that keeps everything it is given, for collector tests (thread-safe: threaded collectors too).
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "agent/collectors/collector.h"

namespace podscope::agent::testing {

class RecordingSink : public SampleSink {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  SeriesId declare(const SeriesSpec& spec) override {
    std::lock_guard lock(mu_);
    specs_.push_back(spec);
    values_.emplace_back();
    return static_cast<SeriesId>(specs_.size() - 1);
  }
  void record(SeriesId id, int64_t, double value) override {
    std::lock_guard lock(mu_);
    values_.at(id).push_back(value);
    ++samples_;
  }

  // The spec of the first series with this metric whose labels include all of `labels`.
  std::optional<SeriesSpec> find(const std::string& metric, const Labels& labels = {}) const {
    std::lock_guard lock(mu_);
    if (std::optional<size_t> i = index_of(metric, labels)) return specs_[*i];
    return std::nullopt;
  }
  // The last value recorded for that series; nullopt when it has none (or does not exist).
  std::optional<double> last(const std::string& metric, const Labels& labels = {}) const {
    std::lock_guard lock(mu_);
    std::optional<size_t> i = index_of(metric, labels);
    if (!i || values_[*i].empty()) return std::nullopt;
    return values_[*i].back();
  }
  size_t series_count() const {
    std::lock_guard lock(mu_);
    return specs_.size();
  }
  // Samples recorded so far, over every series.
  size_t sample_count() const {
    std::lock_guard lock(mu_);
    return samples_;
  }

 private:
  std::optional<size_t> index_of(const std::string& metric, const Labels& labels) const {
    for (size_t i = 0; i < specs_.size(); ++i) {
      if (specs_[i].metric != metric) continue;
      bool all = true;
      for (const auto& wanted : labels) {
        bool present = false;
        for (const auto& label : specs_[i].labels) present |= label == wanted;
        all &= present;
      }
      if (all) return i;
    }
    return std::nullopt;
  }

  mutable std::mutex mu_;
  std::vector<SeriesSpec> specs_;
  std::vector<std::vector<double>> values_;
  size_t samples_ = 0;
};

}  // namespace podscope::agent::testing
