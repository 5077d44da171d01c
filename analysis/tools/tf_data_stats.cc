#include "analysis/tools/tf_data_stats.h"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <span>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::CombinedTfDataStats;
using tensorflow::profiler::InputPipelineMetadata;
using tensorflow::profiler::InputPipelineStat;
using tensorflow::profiler::InputPipelineStats;
using tensorflow::profiler::IteratorMetadata;
using tensorflow::profiler::IteratorStat;
using tensorflow::profiler::TfDataBottleneckAnalysis;
using tensorflow::profiler::TfDataStats;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;

// TensorFlow's iterators that produce their elements ahead, on other threads.
constexpr std::string_view kAsyncIteratorKinds[] = {
    "Prefetch",    "ParallelInterleave",       "ParallelMap",  "ParseExample", "MapAndBatch",
    "DataService", "LegacyParallelInterleave", "ParallelBatch"};
constexpr std::string_view kStageCategoryParam = "category";

bool is_async_kind(std::string_view kind) {
  return std::find(std::begin(kAsyncIteratorKinds), std::end(kAsyncIteratorKinds), kind) !=
         std::end(kAsyncIteratorKinds);
}

// `Map` of `Iterator::Prefetch::Map`.
std::string_view iterator_kind(std::string_view long_name) {
  const size_t last = long_name.rfind("::");
  return last == std::string_view::npos ? long_name : long_name.substr(last + 2);
}

// A root iterator's name has exactly two `::`-separated parts: `Iterator::<Root>`.
bool is_root_iterator(std::string_view long_name) {
  const size_t first = long_name.find("::");
  return first != std::string_view::npos && long_name.find("::", first + 2) == std::string_view::npos;
}

// ---------------------------------------------------------------------------------------------------------
// Iterator calls of one plane, whichever kind of events they came from.

// One call of one iterator (or input stage), in ps on the plane's time base.
struct IteratorCall {
  int64_t iterator_id = 0;
  int64_t start_ps = 0;
  int64_t end_ps = 0;
};

// A call that runs within another (indices into PlaneCalls::calls).
struct ChildLink {
  uint32_t parent = 0;
  uint32_t child = 0;
};

struct PlaneCalls {
  std::vector<IteratorCall> calls;
  // Every call's children, in the order they were found: one vector for the plane, grouped by parent only for the
  // walks (CallChildren), where a vector per call cost an allocation or three per call.
  std::vector<ChildLink> child_links;
  std::map<int64_t, IteratorMetadata> metadata;
  // The calls of each root iterator.
  std::map<int64_t, std::vector<uint32_t>> root_calls;
};

// ---------------------------------------------------------------------------------------------------------
// TensorFlow's iterator events.

enum class TfDataEventKind { kOther, kIterator, kProduce, kConsume };

TfDataEventKind tf_data_event_kind(std::string_view name) {
  if (name.starts_with(xspace::kIteratorEventPrefix)) return TfDataEventKind::kIterator;
  if (name.ends_with(xspace::kProduceEventSuffix) &&
      is_async_kind(name.substr(0, name.size() - xspace::kProduceEventSuffix.size()))) {
    return TfDataEventKind::kProduce;
  }
  if (name.ends_with(xspace::kConsumeEventSuffix) &&
      is_async_kind(name.substr(0, name.size() - xspace::kConsumeEventSuffix.size()))) {
    return TfDataEventKind::kConsume;
  }
  return TfDataEventKind::kOther;
}

// Builds the calls of a TensorFlow host plane: nesting line by line, then the Produce/Consume links.
class HostPlaneCalls {
 public:
  explicit HostPlaneCalls(const XPlane& plane) : plane_(plane), reader_(plane) {}

  PlaneCalls build() && {
    origin_ns_ = earliest_line_ns();
    for (const XLine& line : plane_.lines()) add_line(line);
    link_producers();
    return std::move(out_);
  }

 private:
  // A tf.data event still open while the line's later events are placed inside it.
  struct Open {
    int64_t end_ps = 0;
    TfDataEventKind kind = TfDataEventKind::kOther;
    size_t index = 0;                          // into out_.calls (iterator) or produces_ (produce)
    std::optional<uint32_t> nearest_iterator;  // this one or the innermost iterator around it
  };
  struct Produce {
    int64_t element_id = 0;
    std::optional<uint32_t> producer;  // the iterator call directly inside it
  };
  struct Consume {
    uint32_t consumer = 0;
    int64_t element_id = 0;
  };
  struct LineEvent {
    int64_t start_ps = 0;
    int64_t end_ps = 0;
    TfDataEventKind kind = TfDataEventKind::kOther;
    const tensorflow::profiler::XEvent* event = nullptr;
  };

  int64_t earliest_line_ns() const {
    int64_t earliest = 0;
    bool any = false;
    for (const XLine& line : plane_.lines()) {
      if (!any || line.timestamp_ns() < earliest) earliest = line.timestamp_ns();
      any = true;
    }
    return earliest;
  }

  TfDataEventKind kind_of(int64_t metadata_id) {
    auto [it, inserted] = kinds_.try_emplace(metadata_id, TfDataEventKind::kOther);
    if (inserted) it->second = tf_data_event_kind(reader_.event_name(metadata_id));
    return it->second;
  }

  // The line's tf.data events by start (an enclosing event before those it encloses), then placed with a
  // stack of the events still open.
  void add_line(const XLine& line) {
    std::vector<LineEvent> events;
    const int64_t line_ps = (line.timestamp_ns() - origin_ns_) * 1000;
    for (const auto& e : line.events()) {
      const TfDataEventKind kind = kind_of(e.metadata_id());
      if (kind == TfDataEventKind::kOther) continue;
      const int64_t start = line_ps + e.offset_ps();
      events.push_back({start, start + e.duration_ps(), kind, &e});
    }
    // Of events with the same span, a Produce encloses the iterator it holds, and an iterator its Consume.
    auto rank = [](TfDataEventKind kind) {
      return kind == TfDataEventKind::kProduce ? 0 : kind == TfDataEventKind::kIterator ? 1 : 2;
    };
    std::stable_sort(events.begin(), events.end(), [&](const LineEvent& a, const LineEvent& b) {
      if (a.start_ps != b.start_ps) return a.start_ps < b.start_ps;
      if (a.end_ps != b.end_ps) return a.end_ps > b.end_ps;
      return rank(a.kind) < rank(b.kind);
    });
    std::vector<Open> open;
    for (const LineEvent& e : events) {
      while (!open.empty() && open.back().end_ps <= e.start_ps) open.pop_back();
      const xspace::XEventView view(reader_, line, *e.event);
      const Open* around = open.empty() ? nullptr : &open.back();
      if (std::optional<Open> placed = place(e, view, around)) open.push_back(*placed);
    }
  }

  std::optional<Open> place(const LineEvent& e, const xspace::XEventView& view, const Open* around) {
    const std::optional<uint32_t> enclosing_iterator = around ? around->nearest_iterator : std::nullopt;
    switch (e.kind) {
      case TfDataEventKind::kIterator: {
        const std::optional<int64_t> id = view.int_stat(xspace::kIteratorIdStat);
        if (!id) return std::nullopt;
        const auto index = static_cast<uint32_t>(out_.calls.size());
        out_.calls.push_back({*id, e.start_ps, e.end_ps});
        describe_iterator(*id, view);
        if (is_root_iterator(view.name())) out_.root_calls[*id].push_back(index);
        if (around && around->kind == TfDataEventKind::kProduce && !produces_[around->index].producer) {
          produces_[around->index].producer = index;
        } else if (enclosing_iterator) {
          out_.child_links.push_back({*enclosing_iterator, index});
        }
        return Open{e.end_ps, e.kind, index, index};
      }
      case TfDataEventKind::kProduce: {
        const std::optional<int64_t> element = view.int_stat(xspace::kElementIdStat);
        if (!element) return std::nullopt;
        produces_.push_back({*element, std::nullopt});
        return Open{e.end_ps, e.kind, produces_.size() - 1, enclosing_iterator};
      }
      case TfDataEventKind::kConsume: {
        const std::optional<int64_t> element = view.int_stat(xspace::kElementIdStat);
        if (element && enclosing_iterator) consumes_.push_back({*enclosing_iterator, *element});
        return std::nullopt;
      }
      case TfDataEventKind::kOther: break;
    }
    return std::nullopt;
  }

  void describe_iterator(int64_t id, const xspace::XEventView& view) {
    auto [it, inserted] = out_.metadata.try_emplace(id);
    if (!inserted) return;
    IteratorMetadata& m = it->second;
    m.set_id(id);
    if (auto parent = view.int_stat(xspace::kIteratorParentIdStat)) m.set_parent_id(*parent);
    m.set_long_name(std::string(view.name()));
    m.set_name(std::string(iterator_kind(view.name())));
    m.set_is_async(is_async_kind(m.name()));
  }

  // A consuming call of an async iterator gets as child the call that produced its element: of the producers
  // whose iterator's parent is the consuming iterator, with the same element id, the last to start before the
  // consuming call ended (element ids can repeat over a long profile; linking every producer would not scale).
  void link_producers() {
    std::map<std::pair<int64_t, int64_t>, std::vector<uint32_t>> producers;  // (parent iterator, element)
    for (const Produce& p : produces_) {
      if (!p.producer) continue;
      const auto md = out_.metadata.find(out_.calls[*p.producer].iterator_id);
      if (md == out_.metadata.end() || md->second.parent_id() == 0) continue;
      producers[{md->second.parent_id(), p.element_id}].push_back(*p.producer);
    }
    auto starts_before = [&](uint32_t a, uint32_t b) { return out_.calls[a].start_ps < out_.calls[b].start_ps; };
    for (auto& [key, calls] : producers) std::sort(calls.begin(), calls.end(), starts_before);
    for (const Consume& c : consumes_) {
      const IteratorCall& consumer = out_.calls[c.consumer];
      const auto it = producers.find({consumer.iterator_id, c.element_id});
      if (it == producers.end()) continue;
      const std::vector<uint32_t>& candidates = it->second;
      const auto after = std::partition_point(candidates.begin(), candidates.end(),
                                              [&](uint32_t p) { return out_.calls[p].start_ps < consumer.end_ps; });
      if (after == candidates.begin() || *std::prev(after) == c.consumer) continue;
      out_.child_links.push_back({c.consumer, *std::prev(after)});
    }
  }

  const XPlane& plane_;
  const xspace::XPlaneReader reader_;
  absl::flat_hash_map<int64_t, TfDataEventKind> kinds_;
  int64_t origin_ns_ = 0;
  std::vector<Produce> produces_;
  std::vector<Consume> consumes_;
  PlaneCalls out_;
};

// ---------------------------------------------------------------------------------------------------------
// Annotated input stages.

// A stage's path from its root (`load::decode`), bounded against parent links that loop.
std::string stage_path(const std::map<int64_t, IteratorMetadata>& metadata, const IteratorMetadata& stage) {
  std::vector<std::string_view> names = {stage.name()};
  int64_t parent = stage.parent_id();
  for (int depth = 0; parent != 0 && depth < kMaxIteratorDepth; ++depth) {
    const auto it = metadata.find(parent);
    if (it == metadata.end()) break;
    names.push_back(it->second.name());
    parent = it->second.parent_id();
  }
  std::string path;
  for (auto it = names.rbegin(); it != names.rend(); ++it) {
    if (!path.empty()) path += "::";
    path += *it;
  }
  return path;
}

// What one stage id says of itself: its parent stage id, name and category (as its first call has them).
struct RawStage {
  int64_t parent = 0;
  std::string_view name;
  std::optional<std::string_view> category;
  uint32_t index = 0;  // the stages numbered as first seen, for the walks over them
};

// A stage as the user named it: the same name under the same parent stage is one stage, whether the program gave
// its calls one id (a stage object reused) or a fresh id per call (the client library's spans). Maps every raw id
// to the first raw id of its (canonical parent, name); parent links that loop or run deeper than the bound stop
// the walk, the stage they reach counting as a root.
class CanonicalStages {
 public:
  explicit CanonicalStages(const absl::flat_hash_map<int64_t, RawStage>& raw)
      : raw_(raw), by_index_(raw.size()), canonical_(raw.size(), kUnknown), canonical_parent_(raw.size(), 0) {
    for (const auto& entry : raw) by_index_[entry.second.index] = &entry;
  }

  // The canonical stage of the stage numbered `index` (RawStage::index), as a stage number.
  uint32_t of(uint32_t index) {
    if (canonical_[index] != kUnknown) return canonical_[index];
    // The chain up to a stage already known (or a root), then down again.
    std::vector<uint32_t>& chain = chain_;
    chain.assign(1, index);
    int64_t above = 0;  // a stage id
    for (int depth = 0; depth < kMaxIteratorDepth; ++depth) {
      const int64_t parent = stage(chain.back()).parent;
      const auto found = parent == 0 ? raw_.end() : raw_.find(parent);
      if (found == raw_.end()) {
        above = parent;
        break;
      }
      const uint32_t parent_index = found->second.index;
      if (canonical_[parent_index] != kUnknown) {
        above = id(canonical_[parent_index]);
        break;
      }
      if (std::find(chain.begin(), chain.end(), parent_index) != chain.end()) break;  // a loop: the top is a root
      chain.push_back(parent_index);
    }
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      const auto [named, inserted] = by_parent_and_name_.try_emplace({above, stage(*it).name}, *it);
      canonical_[*it] = named->second;
      if (inserted) canonical_parent_[*it] = above;
      above = id(named->second);
    }
    return canonical_[index];
  }

  // A stage's id, and the parent id of a canonical stage (0 for a root), by stage number.
  int64_t id(uint32_t index) const { return by_index_[index]->first; }
  const RawStage& stage(uint32_t index) const { return by_index_[index]->second; }
  int64_t parent_of(uint32_t canonical_index) const { return canonical_parent_[canonical_index]; }

 private:
  static constexpr uint32_t kUnknown = std::numeric_limits<uint32_t>::max();

  const absl::flat_hash_map<int64_t, RawStage>& raw_;
  std::vector<const std::pair<const int64_t, RawStage>*> by_index_;
  std::vector<uint32_t> canonical_;
  std::vector<int64_t> canonical_parent_;
  absl::flat_hash_map<std::pair<int64_t, std::string_view>, uint32_t> by_parent_and_name_;
  std::vector<uint32_t> chain_;  // of(): kept from stage to stage (most stages are new, one per call)
};

// Each call's children: the calls of the raw stages whose parent is its raw stage and that overlap it (with a
// fresh id per call, exactly the calls nested in it; with one id per stage, those running within it). A stage's
// calls by start, with the longest of them, bound the search. One sort of the calls and one of the stage links:
// no container per stage, and a stage's calls found by its number (RawStage::index), not by its id.
void link_stage_children(const absl::flat_hash_map<int64_t, RawStage>& raw, const std::vector<int64_t>& raw_id_of_call,
                         const std::vector<uint32_t>& stage_of_call, const std::vector<IteratorCall>& calls,
                         std::vector<ChildLink>& child_links) {
  std::vector<uint32_t> by_stage(calls.size());
  std::iota(by_stage.begin(), by_stage.end(), 0u);
  std::sort(by_stage.begin(), by_stage.end(), [&](uint32_t a, uint32_t b) {
    return std::tie(raw_id_of_call[a], calls[a].start_ps) < std::tie(raw_id_of_call[b], calls[b].start_ps);
  });
  struct StageCalls {
    size_t begin = 0, end = 0;  // into by_stage
    int64_t longest_ps = 0;
  };
  std::vector<StageCalls> of_stage(raw.size());  // by stage number
  for (size_t i = 0; i < by_stage.size(); ++i) {
    const IteratorCall& call = calls[by_stage[i]];
    StageCalls& stage = of_stage[stage_of_call[by_stage[i]]];
    if (stage.end == 0) stage.begin = i;  // a stage's calls are contiguous in by_stage
    stage.end = i + 1;
    stage.longest_ps = std::max(stage.longest_ps, call.end_ps - call.start_ps);
  }
  struct Link {
    int64_t parent = 0;  // stage ids
    int64_t child = 0;
    uint32_t child_index = 0;
    bool operator<(const Link& o) const { return std::tie(parent, child) < std::tie(o.parent, o.child); }
  };
  std::vector<Link> links;
  links.reserve(raw.size());
  for (const auto& [id, stage] : raw) {
    if (stage.parent != 0 && stage.parent != id) links.push_back({stage.parent, id, stage.index});
  }
  std::sort(links.begin(), links.end());
  // The calls by stage id and the links by parent stage id, merged: each call's links are found by walking both in
  // step, not by a search per call.
  auto first_link = links.begin();
  for (const uint32_t p : by_stage) {
    const int64_t parent_stage = raw_id_of_call[p];
    while (first_link != links.end() && first_link->parent < parent_stage) ++first_link;
    const IteratorCall& parent = calls[p];
    for (auto link = first_link; link != links.end() && link->parent == parent_stage; ++link) {
      const StageCalls& child = of_stage[link->child_index];
      const int64_t earliest_start = parent.start_ps - child.longest_ps;
      auto it = std::lower_bound(by_stage.begin() + static_cast<std::ptrdiff_t>(child.begin),
                                 by_stage.begin() + static_cast<std::ptrdiff_t>(child.end), earliest_start,
                                 [&](uint32_t c, int64_t t) { return calls[c].start_ps < t; });
      const auto stage_end = by_stage.begin() + static_cast<std::ptrdiff_t>(child.end);
      for (; it != stage_end && calls[*it].start_ps < parent.end_ps; ++it) {
        if (calls[*it].end_ps > parent.start_ps) child_links.push_back({p, *it});
      }
    }
  }
}

PlaneTfDataStats pipelines_of(const PlaneCalls& plane, const std::map<int64_t, std::string>& pipeline_names);

// The calls of the stages on a plane's first Input Pipeline line, event by event, then linked and named by stage.
class StageCallReader final : public InputStageStatsReader {
 public:
  explicit StageCallReader(const xspace::XPlaneReader& plane)
      : plane_id_(plane.proto().id()),
        line_(plane.find_line(xspace::kInputPipelineLineName)),
        id_stat_(plane.stat_id(xspace::kInputStageIdStat)),
        parent_stat_(plane.stat_id(xspace::kInputStageParentIdStat)),
        category_stat_(plane.stat_id(xspace::kInputStageCategoryStat)) {
    if (line_ == nullptr) return;
    // Clients give each call a stage id of its own: as many calls, and ids, as events.
    const auto events = static_cast<size_t>(line_->events_size());
    out_.calls.reserve(events);
    raw_id_of_call_.reserve(events);
    stage_of_call_.reserve(events);
    raw_.reserve(events);
  }

  bool reads_line(const XLine& line) const override { return &line == line_; }

  void add_event(const xspace::XEventView& e) override {
    const std::optional<int64_t> id = e.int_stat(id_stat_);
    if (!id || *id == 0) return;  // 0 is "no parent"
    out_.calls.push_back({*id, e.offset_ps(), e.offset_ps() + e.duration_ps()});
    raw_id_of_call_.push_back(*id);
    auto [it, inserted] = raw_.try_emplace(*id);
    if (inserted) it->second.index = static_cast<uint32_t>(raw_.size() - 1);
    stage_of_call_.push_back(it->second.index);
    if (!inserted) return;
    it->second.parent = e.int_stat(parent_stat_).value_or(0);
    it->second.name = e.name();
    it->second.category = e.str_stat(category_stat_);
  }

  PlaneTfDataStats finish() && override {
    const PlaneCalls calls = std::move(*this).calls();
    std::map<int64_t, std::string> names;
    for (const auto& [root_id, root_calls] : calls.root_calls) {
      names[root_id] = absl::StrCat(calls.metadata.at(root_id).name(), " (core ", plane_id_, ")");
    }
    return pipelines_of(calls, names);
  }

 private:
  PlaneCalls calls() &&;

  const int64_t plane_id_;
  const XLine* const line_;
  const std::optional<int64_t> id_stat_;
  const std::optional<int64_t> parent_stat_;
  const std::optional<int64_t> category_stat_;
  PlaneCalls out_;
  absl::flat_hash_map<int64_t, RawStage> raw_;
  std::vector<int64_t> raw_id_of_call_;
  std::vector<uint32_t> stage_of_call_;  // RawStage::index of each call's stage
};

PlaneCalls StageCallReader::calls() && {
  PlaneCalls& out = out_;
  absl::flat_hash_map<int64_t, RawStage>& raw = raw_;
  const std::vector<int64_t>& raw_id_of_call = raw_id_of_call_;
  if (line_ == nullptr) return std::move(out);
  link_stage_children(raw, raw_id_of_call, stage_of_call_, out.calls, out.child_links);

  CanonicalStages canonical(raw);
  for (uint32_t c = 0; c < out.calls.size(); ++c) {
    const uint32_t canonical_index = canonical.of(stage_of_call_[c]);
    const int64_t id = canonical.id(canonical_index);
    const int64_t parent = canonical.parent_of(canonical_index);
    out.calls[c].iterator_id = id;
    if (parent == 0) out.root_calls[id].push_back(c);
    auto [it, inserted] = out.metadata.try_emplace(id);
    if (!inserted) continue;
    const RawStage& stage = canonical.stage(canonical_index);
    it->second.set_id(id);
    it->second.set_parent_id(parent);
    it->second.set_name(std::string(stage.name));
    if (stage.category) (*it->second.mutable_params())[std::string(kStageCategoryParam)] = std::string(*stage.category);
  }
  for (auto& [id, m] : out.metadata) m.set_long_name(stage_path(out.metadata, m));
  return std::move(out);
}

// ---------------------------------------------------------------------------------------------------------
// The algorithm: per pipeline, latencies of every call and the iterator tree of the slowest ones.

int64_t covered_length(std::vector<std::pair<int64_t, int64_t>>& spans) {
  std::sort(spans.begin(), spans.end());
  int64_t covered = 0;
  int64_t reached = INT64_MIN;
  for (const auto& [from, to] : spans) {
    const int64_t begin = std::max(from, reached);
    if (to > begin) covered += to - begin;
    reached = std::max(reached, to);
  }
  return covered;
}

// Each call's children, grouped by call from the plane's links (in the order they were found) in one counting
// pass.
class CallChildren {
 public:
  explicit CallChildren(const PlaneCalls& plane)
      : first_(plane.calls.size() + 1, 0), children_(plane.child_links.size()) {
    for (const ChildLink& link : plane.child_links) ++first_[link.parent + 1];
    for (size_t c = 1; c < first_.size(); ++c) first_[c] += first_[c - 1];
    std::vector<uint32_t> next(first_.begin(), first_.end() - 1);
    for (const ChildLink& link : plane.child_links) children_[next[link.parent]++] = link.child;
  }

  std::span<const uint32_t> of(uint32_t call) const {
    return std::span<const uint32_t>(children_).subspan(first_[call], first_[call + 1] - first_[call]);
  }

 private:
  std::vector<uint32_t> first_;  // by call: where its children start in children_, then the end
  std::vector<uint32_t> children_;
};

// One root call's iterator tree, walked within the bounds; a call reached twice (through two links) counts once.
class CallTreeWalk {
 public:
  CallTreeWalk(const std::vector<IteratorCall>& calls, const CallChildren& children, std::vector<uint32_t>& visited_by,
               uint32_t walk_id)
      : calls_(calls), children_(children), visited_by_(visited_by), walk_id_(walk_id) {}

  void run(uint32_t root, InputPipelineStat& out, TfDataWalkCounts& counts) && {
    visit(root, /*blocking=*/true, 0);
    if (depth_bound_hit_) ++counts.depth_bound_hits;
    if (call_bound_hit_) ++counts.call_bound_hits;
    // The blocking iterator with the largest self time; the root when none exceeds it.
    const int64_t root_id = calls_[root].iterator_id;
    int64_t bottleneck = root_id;
    int64_t bottleneck_ps = stats_[root_id].self_time_ps();
    for (const auto& [id, stat] : stats_) {
      if (stat.is_blocking() && stat.self_time_ps() > bottleneck_ps) {
        bottleneck = id;
        bottleneck_ps = stat.self_time_ps();
      }
    }
    out.set_bottleneck_iterator_id(bottleneck);
    out.set_bottleneck_iterator_latency_ps(bottleneck_ps);
    for (auto& [id, stat] : stats_) (*out.mutable_iterator_stats())[id] = std::move(stat);
  }

 private:
  void visit(uint32_t index, bool blocking, int depth) {
    if (depth > kMaxIteratorDepth) {
      depth_bound_hit_ = true;
      return;
    }
    if (visited_by_[index] == walk_id_) return;
    if (visited_ >= kMaxIteratorCallsPerWalk) {
      call_bound_hit_ = true;
      return;
    }
    visited_by_[index] = walk_id_;
    ++visited_;
    const IteratorCall& call = calls_[index];
    auto [it, inserted] = stats_.try_emplace(call.iterator_id);
    IteratorStat& stat = it->second;  // std::map: stays valid while children add theirs
    if (inserted) {
      stat.set_id(call.iterator_id);
      stat.set_start_time_ps(call.start_ps);
    }
    std::vector<std::pair<int64_t, int64_t>> overlaps;
    for (uint32_t child_index : children_.of(index)) {
      const IteratorCall& child = calls_[child_index];
      const int64_t from = std::max(child.start_ps, call.start_ps);
      const int64_t to = std::min(child.end_ps, call.end_ps);
      if (to > from) overlaps.emplace_back(from, to);
      visit(child_index, blocking && to > from, depth + 1);
    }
    const int64_t duration = call.end_ps - call.start_ps;
    stat.set_duration_ps(stat.duration_ps() + duration);
    stat.set_self_time_ps(stat.self_time_ps() + duration - covered_length(overlaps));
    stat.set_is_blocking(stat.is_blocking() || blocking);
    stat.set_num_calls(stat.num_calls() + 1);
  }

  const std::vector<IteratorCall>& calls_;
  const CallChildren& children_;
  std::vector<uint32_t>& visited_by_;
  const uint32_t walk_id_;
  std::map<int64_t, IteratorStat> stats_;
  int64_t visited_ = 0;
  bool depth_bound_hit_ = false;
  bool call_bound_hit_ = false;
};

// `pipeline_names`: by root iterator id.
PlaneTfDataStats pipelines_of(const PlaneCalls& plane, const std::map<int64_t, std::string>& pipeline_names) {
  PlaneTfDataStats out;
  for (const auto& [id, m] : plane.metadata) (*out.stats.mutable_iterator_metadata())[id] = m;
  const CallChildren children(plane);
  std::vector<uint32_t> visited_by(plane.calls.size(), 0);
  uint32_t walk_id = 0;
  for (const auto& [root_id, root_calls] : plane.root_calls) {
    std::vector<uint32_t> slowest_first = root_calls;
    auto duration = [&](uint32_t c) { return plane.calls[c].end_ps - plane.calls[c].start_ps; };
    std::sort(slowest_first.begin(), slowest_first.end(), [&](uint32_t a, uint32_t b) {
      return duration(a) != duration(b) ? duration(a) > duration(b) : plane.calls[a].start_ps < plane.calls[b].start_ps;
    });
    InputPipelineStats& pipeline = (*out.stats.mutable_input_pipelines())[root_id];
    pipeline.mutable_metadata()->set_id(root_id);
    pipeline.mutable_metadata()->set_type(InputPipelineMetadata::HOST);
    pipeline.mutable_metadata()->set_name(pipeline_names.at(root_id));
    int64_t sum_ps = 0;
    int64_t slow = 0;
    for (uint32_t c : slowest_first) {
      sum_ps += duration(c);
      if (duration(c) > kSlowTfDataCallPs) ++slow;
    }
    pipeline.set_avg_latency_ps(sum_ps / static_cast<int64_t>(slowest_first.size()));
    pipeline.set_min_latency_ps(duration(slowest_first.back()));
    pipeline.set_max_latency_ps(duration(slowest_first.front()));
    pipeline.set_num_slow_calls(slow);
    pipeline.set_num_calls(static_cast<int64_t>(slowest_first.size()));
    const size_t kept = std::min(slowest_first.size(), kSlowestTfDataCallsKept);
    for (size_t i = 0; i < kept; ++i) {
      CallTreeWalk(plane.calls, children, visited_by, ++walk_id).run(slowest_first[i], *pipeline.add_stats(), out.walk);
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Combining hosts.

// The keys of a protobuf map in order: its own iteration order changes from run to run.
template <typename Map>
std::vector<int64_t> sorted_keys(const Map& map) {
  std::vector<int64_t> keys;
  keys.reserve(map.size());
  for (const auto& [key, value] : map) keys.push_back(key);
  std::sort(keys.begin(), keys.end());
  return keys;
}

// Moves `from`'s pipelines into `into`, renumbering the iterator ids of `from` that `into` already uses and
// numbering pipeline names that `into` already has, both in id order.
void merge_into(TfDataStats& into, TfDataStats from) {
  int64_t next_id = 1;
  for (const auto& [id, m] : into.iterator_metadata()) next_id = std::max(next_id, id + 1);
  for (const auto& [id, m] : from.iterator_metadata()) next_id = std::max(next_id, id + 1);
  absl::flat_hash_map<int64_t, int64_t> renumbered;
  for (const int64_t id : sorted_keys(from.iterator_metadata())) {
    if (into.iterator_metadata().contains(id)) renumbered[id] = next_id++;
  }
  auto id_of = [&](int64_t id) {
    const auto it = renumbered.find(id);
    return it == renumbered.end() ? id : it->second;
  };
  for (auto& [id, m] : *from.mutable_iterator_metadata()) {
    m.set_id(id_of(id));
    if (m.parent_id() != 0) m.set_parent_id(id_of(m.parent_id()));
    (*into.mutable_iterator_metadata())[m.id()] = std::move(m);
  }
  absl::flat_hash_set<std::string> names;
  for (const auto& [id, pipeline] : into.input_pipelines()) names.insert(pipeline.metadata().name());
  // Per name, the copy number to try next: numbering stays linear however many pipelines share a name.
  absl::flat_hash_map<std::string, int> next_copy;
  for (const int64_t root_id : sorted_keys(from.input_pipelines())) {
    InputPipelineStats& pipeline = from.mutable_input_pipelines()->at(root_id);
    pipeline.mutable_metadata()->set_id(id_of(root_id));
    // Two files of one host both have a Host:0: the second becomes Host:0 #2.
    const std::string& base = pipeline.metadata().name();
    std::string name = base;
    if (names.contains(name)) {
      int& copy = next_copy.try_emplace(base, 2).first->second;
      do name = absl::StrCat(base, " #", copy++);
      while (names.contains(name));
    }
    names.insert(name);
    pipeline.mutable_metadata()->set_name(std::move(name));
    for (InputPipelineStat& call : *pipeline.mutable_stats()) {
      call.set_bottleneck_iterator_id(id_of(call.bottleneck_iterator_id()));
      google::protobuf::Map<int64_t, IteratorStat> stats;
      for (auto& [id, stat] : *call.mutable_iterator_stats()) {
        stat.set_id(id_of(id));
        stats[stat.id()] = std::move(stat);
      }
      *call.mutable_iterator_stats() = std::move(stats);
    }
    (*into.mutable_input_pipelines())[id_of(root_id)] = std::move(pipeline);
  }
}

enum class BottleneckKind {
  kSource,
  kDataService,
  kParallelizableTransformation,
  kSequentialTransformation,
  kStageRead,
  kStagePreprocess,
  kStageEnqueue,
  kOther
};

BottleneckKind bottleneck_kind(const IteratorMetadata& iterator) {
  if (const auto category = iterator.params().find(std::string(kStageCategoryParam));
      category != iterator.params().end()) {
    if (category->second == "read") return BottleneckKind::kStageRead;
    if (category->second == "preprocess") return BottleneckKind::kStagePreprocess;
    if (category->second == "enqueue") return BottleneckKind::kStageEnqueue;
    return BottleneckKind::kOther;
  }
  static const std::map<std::string_view, BottleneckKind> kKinds = {
      {"TFRecord", BottleneckKind::kSource},
      {"TextLine", BottleneckKind::kSource},
      {"FixedLengthRecord", BottleneckKind::kSource},
      {"FixedLengthRecordV2", BottleneckKind::kSource},
      {"SSTable", BottleneckKind::kSource},
      {"RecordIO", BottleneckKind::kSource},
      {"FromTensor", BottleneckKind::kSource},
      {"TensorSlice", BottleneckKind::kSource},
      {"Generator", BottleneckKind::kSource},
      {"DataService", BottleneckKind::kDataService},
      {"Map", BottleneckKind::kParallelizableTransformation},
      {"Interleave", BottleneckKind::kParallelizableTransformation},
      {"Filter", BottleneckKind::kSequentialTransformation},
      {"Batch", BottleneckKind::kSequentialTransformation},
      {"Unbatch", BottleneckKind::kSequentialTransformation}};
  const auto it = kKinds.find(iterator.name());
  return it == kKinds.end() ? BottleneckKind::kOther : it->second;
}

std::string suggestion_for(BottleneckKind kind) {
  switch (kind) {
    case BottleneckKind::kSource:
      return "Read this source in parallel (interleave over file shards with num_parallel_calls=tf.data.AUTOTUNE) "
             "and keep the data close to the host (same region, local disk or a cache).";
    case BottleneckKind::kDataService:
      return "The tf.data service is slow to deliver: profile one of its workers to see what holds it up.";
    case BottleneckKind::kParallelizableTransformation:
      return "Run this transformation in parallel with num_parallel_calls=tf.data.AUTOTUNE, and cache its output "
             "when it fits in memory and nothing before it is random (shuffle, augmentation).";
    case BottleneckKind::kSequentialTransformation:
      return "This transformation has no parallel form: add parallelism around it (run copies of the pipeline over "
             "input shards and interleave them), and cache after it where the data allows.";
    case BottleneckKind::kStageRead:
      return "Read in parallel (more loader workers or concurrent reads) and keep the data close to the host "
             "(local disk or a cache).";
    case BottleneckKind::kStagePreprocess:
      return "Preprocess in parallel (more loader workers), and cache preprocessed samples when they fit in memory "
             "and nothing before them is random.";
    case BottleneckKind::kStageEnqueue:
      return "Overlap the copy to the device with compute: prefetch the next batch onto the device from pinned host "
             "memory.";
    case BottleneckKind::kOther: break;
  }
  return "See the tf.data performance analysis guide (tensorflow.org/guide/data_performance_analysis) for this "
         "kind of iterator.";
}

// One per host pipeline: the bottleneck of its slowest call, slowest pipeline first.
void add_bottlenecks(CombinedTfDataStats& combined) {
  std::vector<TfDataBottleneckAnalysis> found;
  for (const auto& [host, stats] : combined.tf_data_stats()) {
    for (const auto& [root_id, pipeline] : stats.input_pipelines()) {
      if (pipeline.metadata().type() != InputPipelineMetadata::HOST || pipeline.stats().empty()) continue;
      const InputPipelineStat& slowest = pipeline.stats(0);
      TfDataBottleneckAnalysis b;
      b.set_host(host);
      b.set_input_pipeline(pipeline.metadata().name());
      b.set_max_latency_ps(pipeline.max_latency_ps());
      b.set_iterator_latency_ps(slowest.bottleneck_iterator_latency_ps());
      const auto iterator = stats.iterator_metadata().find(slowest.bottleneck_iterator_id());
      if (iterator != stats.iterator_metadata().end()) {
        b.set_iterator_name(iterator->second.name());
        b.set_iterator_long_name(iterator->second.long_name());
        b.set_suggestion(suggestion_for(bottleneck_kind(iterator->second)));
      }
      found.push_back(std::move(b));
    }
  }
  std::stable_sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
    if (a.max_latency_ps() != b.max_latency_ps()) return a.max_latency_ps() > b.max_latency_ps();
    return std::tie(a.host(), a.input_pipeline()) < std::tie(b.host(), b.input_pipeline());
  });
  for (auto& b : found) *combined.add_bottleneck_analysis() = std::move(b);
}

void add_summary(CombinedTfDataStats& combined, const TfDataWalkCounts& walk) {
  const int64_t max_latency_ps =
      combined.bottleneck_analysis().empty() ? 0 : combined.bottleneck_analysis(0).max_latency_ps();
  std::string summary;
  if (combined.bottleneck_analysis().empty()) {
    summary =
        "no tf.data activity captured: no Iterator::* events on a /host:CPU plane and no input stages on a "
        "/device:CUSTOM: plane. If the job uses tf.data or annotated input stages, capture a longer window.";
  } else if (max_latency_ps > kSlowTfDataCallPs) {
    combined.set_is_input_bound(true);
    summary =
        "An input pipeline has calls slower than 50 us: below, each pipeline's bottleneck iterator (the "
        "blocking iterator with the largest self time in its slowest call) and what to try.";
  } else {
    summary =
        "No input pipeline has a call slower than 50 us. Hosts that were not captured may still be "
        "input-bound.";
  }
  if (walk.depth_bound_hits > 0 || walk.call_bound_hits > 0) {
    absl::StrAppend(&summary, " The iterator tree walk stopped at its depth bound (", kMaxIteratorDepth, ") in ",
                    walk.depth_bound_hits, " calls and at its bound of ", kMaxIteratorCallsPerWalk,
                    " iterator calls in ", walk.call_bound_hits, " calls; their stats are partial.");
  }
  combined.set_summary(std::move(summary));
}

std::string format_ps(int64_t ps) {
  if (ps >= 1'000'000'000) return absl::StrFormat("%.3f ms", static_cast<double>(ps) / 1e9);
  return absl::StrFormat("%.1f us", static_cast<double>(ps) / 1e6);
}

}  // namespace

bool names_tf_data_iterators(const XPlane& plane) {
  for (const auto& [id, m] : plane.event_metadata()) {
    if (std::string_view(m.name()).starts_with(xspace::kIteratorEventPrefix)) return true;
  }
  return false;
}

PlaneTfDataStats xplane_to_tf_data_stats(const XPlane& host_plane) {
  const PlaneCalls calls = HostPlaneCalls(host_plane).build();
  // Host:0, Host:1... in the order of the pipelines' first calls.
  std::vector<std::pair<int64_t, int64_t>> first_call;  // (start, root id)
  for (const auto& [root_id, root_calls] : calls.root_calls) {
    int64_t first = INT64_MAX;
    for (uint32_t c : root_calls) first = std::min(first, calls.calls[c].start_ps);
    first_call.emplace_back(first, root_id);
  }
  std::sort(first_call.begin(), first_call.end());
  std::map<int64_t, std::string> names;
  for (size_t i = 0; i < first_call.size(); ++i) names[first_call[i].second] = absl::StrCat("Host:", i);
  return pipelines_of(calls, names);
}

std::unique_ptr<InputStageStatsReader> make_input_stage_stats_reader(const xspace::XPlaneReader& custom_plane) {
  return std::make_unique<StageCallReader>(custom_plane);
}

PlaneTfDataStats input_stages_to_tf_data_stats(const XPlane& custom_plane) {
  const xspace::XPlaneReader plane(custom_plane);
  StageCallReader reader(plane);
  PlaneEventReader* readers[] = {&reader};
  walk_plane(plane, readers);
  return std::move(reader).finish();
}

CombinedTfDataStats combine_tf_data_stats(std::vector<HostTfDataStats> hosts) {
  CombinedTfDataStats combined;
  TfDataWalkCounts walk;
  for (HostTfDataStats& h : hosts) {
    walk.depth_bound_hits += h.plane.walk.depth_bound_hits;
    walk.call_bound_hits += h.plane.walk.call_bound_hits;
    if (h.plane.stats.input_pipelines().empty()) continue;
    merge_into((*combined.mutable_tf_data_stats())[h.host], std::move(h.plane.stats));
  }
  add_bottlenecks(combined);
  add_summary(combined, walk);
  return combined;
}

std::string tf_data_stats_to_text(const CombinedTfDataStats& combined) {
  std::string text = absl::StrCat("tf.data bottleneck analysis\n", combined.summary(), "\n");
  std::map<std::string, const TfDataStats*> hosts;  // in name order
  std::map<std::pair<std::string_view, std::string_view>, std::vector<const TfDataBottleneckAnalysis*>> bottlenecks;
  for (const TfDataBottleneckAnalysis& b : combined.bottleneck_analysis()) {
    bottlenecks[{b.host(), b.input_pipeline()}].push_back(&b);
  }
  for (const auto& [host, stats] : combined.tf_data_stats()) hosts[host] = &stats;
  for (const auto& [host, stats] : hosts) {
    absl::StrAppend(&text, "host ", host, "\n");
    std::map<std::string, const InputPipelineStats*> pipelines;  // names are unique within a host
    for (const auto& [id, pipeline] : stats->input_pipelines()) pipelines[pipeline.metadata().name()] = &pipeline;
    for (const auto& [name, p] : pipelines) {
      absl::StrAppend(&text, "  pipeline ", name, ": calls ", p->num_calls(), "; latency avg ",
                      format_ps(p->avg_latency_ps()), ", min ", format_ps(p->min_latency_ps()), ", max ",
                      format_ps(p->max_latency_ps()), "; slow calls (> 50 us) ", p->num_slow_calls(), "\n");
      const auto found = bottlenecks.find({host, name});
      if (found == bottlenecks.end()) continue;
      for (const TfDataBottleneckAnalysis* b : found->second) {
        absl::StrAppend(&text, "    bottleneck of the slowest call: ", b->iterator_name(), " (",
                        b->iterator_long_name(), "), self time ", format_ps(b->iterator_latency_ps()), "\n",
                        "    suggestion: ", b->suggestion(), "\n");
      }
    }
  }
  return text;
}

}  // namespace podscope::analysis
