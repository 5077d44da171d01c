// A SampleSink that keeps everything in memory, for collector tests.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/collectors/collector.h"

namespace podscope::agent {

class RecordingSink : public SampleSink {
 public:
  SeriesId declare(const SeriesSpec& spec) override {
    specs.push_back(spec);
    values.emplace_back();
    return static_cast<SeriesId>(specs.size() - 1);
  }
  void record(SeriesId id, int64_t, double value) override { values[id].push_back(value); }

  // The last value of the series with this metric and these labels (label order as declared).
  double last(const std::string& metric, const std::vector<std::pair<std::string, std::string>>& labels = {}) const {
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].metric == metric && specs[i].labels == labels && !values[i].empty()) return values[i].back();
    }
    return -1;
  }
  bool has(const std::string& metric, const std::vector<std::pair<std::string, std::string>>& labels = {}) const {
    for (const auto& s : specs) {
      if (s.metric == metric && s.labels == labels) return true;
    }
    return false;
  }

  std::vector<SeriesSpec> specs;
  std::vector<std::vector<double>> values;
};

}  // namespace podscope::agent
