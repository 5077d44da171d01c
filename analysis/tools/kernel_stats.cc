#include "analysis/tools/kernel_stats.h"

#include <algorithm>
#include <charconv>
#include <vector>

#include "analysis/steps/op_classifier.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::KernelReport;
using tensorflow::profiler::XLine;
using tensorflow::profiler::XPlane;
using xspace::XEventView;
using xspace::XPlaneReader;

// Stat names TF's GPU tracer writes (xplane_schema).
constexpr std::string_view kLevel0Stat = "level 0";  // older TF files: the op that launched the kernel
constexpr std::string_view kAnnotationStat = "annotation";
constexpr std::string_view kEquationStat = "equation";  // an einsum's equation
constexpr std::string_view kStreamLinePrefix = "Stream #";
using xspace::kCorrelationIdStat;
constexpr std::string_view kLaunchApiPart = "Launch";  // cudaLaunchKernel, cuLaunchKernel, ...

// Substrings of kernel names that XProf takes for tensor-core kernels (volta_h884gemm, turing_fp16_s1688cudnn...).
constexpr std::string_view kTensorCoreKernelNamePatterns[] = {"16816",
                                                              "c1688",
                                                              "conv1x1",
                                                              "conv2d_c1_k1",
                                                              "dgrad_1x1_stride_2x2",
                                                              "direct_group",
                                                              "first_layer_wgrad_kernel",
                                                              "h1688",
                                                              "h884",
                                                              "hmma",
                                                              "i16832",
                                                              "i8816",
                                                              "s884",
                                                              "s1688",
                                                              "xmma_gemm",
                                                              "xmma_implicit_gemm",
                                                              "xmma_sparse_conv",
                                                              "xmma_sparse_gemm",
                                                              "xmma_warp_specialized_implicit_gemm"};

bool parse_u32(std::string_view text, uint32_t& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// `x,y,z`
bool parse_dims(std::string_view text, std::array<uint32_t, 3>& dims) {
  std::array<uint32_t, 3> parsed{};
  for (size_t i = 0; i < 3; ++i) {
    const size_t comma = i < 2 ? text.find(',') : text.size();
    if (comma == std::string_view::npos || !parse_u32(text.substr(0, comma), parsed[i])) return false;
    text.remove_prefix(std::min(text.size(), comma + 1));
  }
  dims = parsed;
  return true;
}

// Tokens separated by spaces or newlines, empty ones skipped.
std::vector<std::string_view> tokens_of(std::string_view text) {
  std::vector<std::string_view> tokens;
  while (!text.empty()) {
    const size_t end = std::min(text.find_first_of(" \n"), text.size());
    if (end > 0) tokens.push_back(text.substr(0, end));
    text.remove_prefix(std::min(text.size(), end + 1));
  }
  return tokens;
}

bool parse_percent(std::string_view text, float& value) {
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size() && value >= 0 && value <= 100;
}

// An einsum with two operands (`ab,bc->ac`) is a matrix multiplication.
bool einsum_is_tensor_core_eligible(std::string_view equation) {
  const size_t arrow = equation.find("->");
  if (arrow == std::string_view::npos || equation.find("->", arrow + 2) != std::string_view::npos) return false;
  return std::count(equation.begin(), equation.begin() + static_cast<std::ptrdiff_t>(arrow), ',') == 1;
}

// The name of the op that launched the kernel, as the newest stat that says so states it: a TF op's name out of
// its full name, else a framework op named in full.
std::string_view op_name_of_kernel(const XEventView& e) {
  for (std::string_view stat : {xspace::kTfOpStat, kLevel0Stat, kAnnotationStat}) {
    if (auto text = e.str_stat(stat); text && !text->empty()) return op_name_of(*text);
  }
  if (auto text = e.str_stat(xspace::kFrameworkOpStat); text && !text->empty()) return *text;
  return {};
}

}  // namespace

std::optional<KernelLaunch> parse_kernel_details(std::string_view kernel_details) {
  KernelLaunch launch;
  bool recognised = false;
  for (std::string_view token : tokens_of(kernel_details)) {
    const size_t colon = token.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view key = token.substr(0, colon);
    const std::string_view value = token.substr(colon + 1);
    bool ok = true;
    if (key == "regs") {
      ok = parse_u32(value, launch.registers_per_thread);
    } else if (key == "static_shared" || key == "shm") {
      ok = parse_u32(value, launch.static_shmem_bytes);
    } else if (key == "dynamic_shared") {
      ok = parse_u32(value, launch.dynamic_shmem_bytes);
    } else if (key == "grid") {
      ok = parse_dims(value, launch.grid);
    } else if (key == "block") {
      ok = parse_dims(value, launch.block);
    } else if (key == "occ_pct") {
      ok = parse_percent(value, launch.occupancy_pct);
    } else {
      continue;  // a field a newer writer added
    }
    if (!ok) return std::nullopt;
    recognised = true;
  }
  if (!recognised) return std::nullopt;
  return launch;
}

bool kernel_name_suggests_tensor_core(std::string_view kernel_name) {
  return std::any_of(std::begin(kTensorCoreKernelNamePatterns), std::end(kTensorCoreKernelNamePatterns),
                     [&](std::string_view pattern) { return contains(kernel_name, pattern); });
}

bool op_is_tensor_core_eligible(std::string_view op_name) {
  for (std::string_view suffix :
       {"Conv2D", "Conv2DBackpropFilter", "Conv2DBackpropInput", "Conv3D", "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropFilter", "DepthwiseConv2dNativeBackpropInput", "/MatMul", "FusedMatMul",
        "/CudnnRNN", "XlaDot", "XlaDotV2"}) {
    if (op_name.ends_with(suffix)) return true;
  }
  for (std::string_view part : {"BatchMatMul", "CudnnRNNV", "CudnnRNNForward", "CudnnRNNBackprop"}) {
    if (contains(op_name, part)) return true;
  }
  return false;
}

std::string_view op_name_of(std::string_view tf_op_fullname) {
  std::string_view op = tf_op_fullname;
  if (const size_t nested = op.rfind("::"); nested != std::string_view::npos) op = op.substr(nested + 2);
  if (const size_t hash = op.find('#'); hash != std::string_view::npos) op = op.substr(0, hash);
  if (const size_t colon = op.rfind(':'); colon != std::string_view::npos) op = op.substr(0, colon);
  return op;
}

bool KernelStatsBuilder::wants_line(std::string_view plane_name, std::string_view line_name) {
  if (plane_name == xspace::kCuptiHostPlaneName) return true;
  if (plane_name.starts_with(xspace::kCustomPlanePrefix)) return is_op_line(PlaneKind::kCustom, line_name);
  return plane_name.starts_with(xspace::kGpuPlanePrefix) && line_name.starts_with(kStreamLinePrefix);
}

KernelStatsBuilder::KernelStatsBuilder() = default;
KernelStatsBuilder::~KernelStatsBuilder() = default;

class KernelStatsBuilder::CustomSpanReader final : public PlaneEventReader {
 public:
  explicit CustomSpanReader(KernelStatsBuilder& builder) : builder_(builder) {}

  bool reads_line(const XLine& line) const override { return is_op_line(PlaneKind::kCustom, line.name()); }
  void begin_line(const XLine& line) override {
    spans_ = &builder_.spans_by_thread_[line.id()];
    spans_->reserve(spans_->size() + static_cast<size_t>(line.events_size()));
  }
  void add_event(const XEventView& e) override {
    auto [it, created] = name_of_metadata_.try_emplace(e.proto().metadata_id());
    if (created) {
      const std::string_view name = e.name();
      auto [name_it, added] =
          builder_.span_name_ids_.try_emplace(std::string(name), static_cast<uint32_t>(builder_.span_names_.size()));
      if (added) builder_.span_names_.emplace_back(name);
      it->second = name_it->second;
    }
    spans_->push_back({e.start_ns(), e.end_ns(), it->second});
  }

 private:
  KernelStatsBuilder& builder_;
  absl::flat_hash_map<int64_t, uint32_t> name_of_metadata_;
  std::vector<Span>* spans_ = nullptr;  // of the line being read
};

void KernelStatsBuilder::begin_plane(size_t, const XPlaneReader& plane, std::vector<PlaneEventReader*>& readers) {
  const std::string_view name = plane.name();
  if (name.starts_with(xspace::kGpuPlanePrefix)) {
    add_gpu_plane(plane.proto());
  } else if (name == xspace::kCuptiHostPlaneName) {
    add_cupti_plane(plane.proto());
  } else if (name.starts_with(xspace::kCustomPlanePrefix)) {
    custom_spans_ = std::make_unique<CustomSpanReader>(*this);
    readers.push_back(custom_spans_.get());
  }
}

void KernelStatsBuilder::end_plane(size_t) { custom_spans_.reset(); }

void KernelStatsBuilder::fold(Key key, uint64_t duration) {
  const float occupancy = key.launch.occupancy_pct;
  add_launch(reports_[std::move(key)], occupancy, duration);
}

void KernelStatsBuilder::add_launch(Totals& totals, float occupancy, uint64_t duration) {
  totals.min_ns = totals.occurrences == 0 ? duration : std::min(totals.min_ns, duration);
  totals.max_ns = std::max(totals.max_ns, duration);
  totals.total_ns += duration;
  totals.occupancy_pct = std::max(totals.occupancy_pct, occupancy);
  ++totals.occurrences;
}

void KernelStatsBuilder::add_cupti_plane(const XPlane& plane_proto) {
  const XPlaneReader plane(plane_proto);
  const std::optional<int64_t> correlation_stat = plane.stat_id(kCorrelationIdStat);
  if (!correlation_stat) return;
  for (const auto& line : plane_proto.lines()) {
    plane.for_each_event(line, [&](const XEventView& e) {
      if (!contains(e.name(), kLaunchApiPart)) return;
      for (const auto& stat : e.proto().stats()) {
        if (static_cast<int64_t>(stat.metadata_id()) != *correlation_stat) continue;
        if (auto id = xspace::stat_as_int(stat)) launches_of_file_.push_back({*id, line.id(), e.start_ns()});
        return;
      }
    });
  }
}

absl::flat_hash_map<int64_t, uint32_t> KernelStatsBuilder::ops_of_launches() {
  absl::flat_hash_map<int64_t, uint32_t> ops;
  std::sort(launches_of_file_.begin(), launches_of_file_.end(), [](const Launch& a, const Launch& b) {
    return std::tie(a.thread_id, a.time_ns) < std::tie(b.thread_id, b.time_ns);
  });
  const auto outer_first = [](const Span& a, const Span& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  };
  // Per thread, one sweep: spans open in start order; at each launch, the innermost span still open encloses it.
  for (auto launch = launches_of_file_.begin(); launch != launches_of_file_.end();) {
    const int64_t thread = launch->thread_id;
    auto spans_it = spans_by_thread_.find(thread);
    std::vector<Span>* spans = spans_it == spans_by_thread_.end() ? nullptr : &spans_it->second;
    if (spans) std::sort(spans->begin(), spans->end(), outer_first);
    std::vector<const Span*> open;
    size_t next = 0;
    for (; launch != launches_of_file_.end() && launch->thread_id == thread; ++launch) {
      if (!spans) continue;
      while (next < spans->size() && (*spans)[next].start_ns <= launch->time_ns) {
        const Span& span = (*spans)[next++];
        while (!open.empty() && open.back()->end_ns <= span.start_ns) open.pop_back();
        open.push_back(&span);
      }
      while (!open.empty() && open.back()->end_ns <= launch->time_ns) open.pop_back();
      if (!open.empty()) ops[launch->correlation_id] = open.back()->name;
    }
  }
  return ops;
}

void KernelStatsBuilder::end_file() {
  if (!pending_.empty()) {
    const absl::flat_hash_map<int64_t, uint32_t> ops = ops_of_launches();
    for (const PendingKernel& kernel : pending_) {
      Key key = pending_keys_[kernel.key];
      if (auto op = ops.find(kernel.correlation_id); op != ops.end()) {
        key.op_name = span_names_[op->second];
        key.op_tensor_core_eligible = key.uses_tensor_core || op_is_tensor_core_eligible(key.op_name);
        ++attributed_by_correlation_;
      }
      fold(std::move(key), kernel.duration_ns);
    }
  }
  pending_.clear();
  pending_keys_.clear();
  pending_key_ids_.clear();
  launches_of_file_.clear();
  spans_by_thread_.clear();
  span_names_.clear();
  span_name_ids_.clear();
}

KernelStatsBuilder::Key KernelStatsBuilder::key_of(std::string_view kernel, std::string_view details,
                                                   std::string_view op_name, std::optional<std::string_view> equation) {
  Key key;
  if (std::optional<KernelLaunch> launch = parse_kernel_details(details)) key.launch = *launch;
  key.name = std::string(kernel);
  key.uses_tensor_core = kernel_name_suggests_tensor_core(key.name);
  if (!op_name.empty()) {
    key.op_name = std::string(op_name);
    // A kernel that uses tensor cores shows its op can, whether or not the op is on the list.
    key.op_tensor_core_eligible = key.uses_tensor_core || op_is_tensor_core_eligible(key.op_name) ||
                                  (equation && einsum_is_tensor_core_eligible(*equation));
  }
  return key;
}

void KernelStatsBuilder::add_gpu_plane(const XPlane& plane_proto) {
  const XPlaneReader plane(plane_proto);
  if (!plane.stat_id(xspace::kKernelDetailsStat)) return;  // no kernels on this plane
  // A plane repeats a few kernels many times: each distinct (kernel, details, op, equation) is read and looked up
  // once; the texts are views into the plane, alive while it is read.
  struct Known {
    Totals* totals = nullptr;         // where its launches fold, once one did
    std::optional<uint32_t> pending;  // its key among the pending ones, once one waited
    std::optional<Key> key;           // until both are known
    bool corrupt_details = false;
  };
  absl::flat_hash_map<std::tuple<int64_t, std::string_view, std::string_view, std::string_view>, Known> known;
  for (const auto& line : plane_proto.lines()) {
    if (!wants_line(plane.name(), line.name())) continue;
    plane.for_each_event(line, [&](const XEventView& e) {
      if (e.duration_ns() <= 0) return;
      const std::optional<std::string_view> details = e.str_stat(xspace::kKernelDetailsStat);
      if (!details || details->empty()) return;  // a copy or a memset
      const std::string_view op_name = op_name_of_kernel(e);
      const std::optional<std::string_view> equation = op_name.empty() ? std::nullopt : e.str_stat(kEquationStat);
      auto [it, created] =
          known.try_emplace(std::make_tuple(e.proto().metadata_id(), *details, op_name, equation.value_or("")));
      Known& k = it->second;
      if (created) {
        k.key = key_of(e.name(), *details, op_name, equation);
        k.corrupt_details = !parse_kernel_details(*details);
      }
      if (k.corrupt_details) ++warnings_.corrupt_kernel_details;
      const auto duration = static_cast<uint64_t>(e.duration_ns());
      ++launches_;
      kernel_time_ns_ += duration;
      const std::optional<int64_t> correlation_id = op_name.empty() ? e.int_stat(kCorrelationIdStat) : std::nullopt;
      if (!correlation_id) {
        if (!k.totals) k.totals = &reports_[*k.key];
        add_launch(*k.totals, k.key->launch.occupancy_pct, duration);
        return;
      }
      if (!k.pending) {
        auto [id, added] = pending_key_ids_.try_emplace(*k.key, static_cast<uint32_t>(pending_keys_.size()));
        if (added) pending_keys_.push_back(*k.key);
        k.pending = id->second;
      }
      pending_.push_back({*correlation_id, *k.pending, duration});
    });
  }
}

KernelStatsResult KernelStatsBuilder::finish(size_t max_reports) && {
  end_file();
  std::vector<std::pair<const Key*, const Totals*>> rows;
  rows.reserve(reports_.size());
  for (const auto& [key, totals] : reports_) rows.emplace_back(&key, &totals);
  const auto longer_first = [](const auto& a, const auto& b) {
    if (a.second->total_ns != b.second->total_ns) return a.second->total_ns > b.second->total_ns;
    return a.first->tied() < b.first->tied();
  };
  const size_t kept = std::min(max_reports, rows.size());
  std::partial_sort(rows.begin(), rows.begin() + static_cast<std::ptrdiff_t>(kept), rows.end(), longer_first);
  KernelStatsResult result;
  result.warnings = warnings_;
  result.kernel_launches = launches_;
  result.kernel_time_ns = kernel_time_ns_;
  result.launches_attributed_by_correlation = attributed_by_correlation_;
  result.reports_cut = rows.size() - kept;
  for (size_t i = 0; i < kept; ++i) *result.db.add_reports() = report_of(*rows[i].first, *rows[i].second);
  return result;
}

KernelReport KernelStatsBuilder::report_of(const Key& key, const Totals& totals) {
  KernelReport r;
  r.set_name(key.name);
  r.set_registers_per_thread(key.launch.registers_per_thread);
  r.set_static_shmem_bytes(key.launch.static_shmem_bytes);
  r.set_dynamic_shmem_bytes(key.launch.dynamic_shmem_bytes);
  for (uint32_t d : key.launch.block) r.add_block_dim(d);
  for (uint32_t d : key.launch.grid) r.add_grid_dim(d);
  r.set_total_duration_ns(totals.total_ns);
  r.set_min_duration_ns(totals.min_ns);
  r.set_max_duration_ns(totals.max_ns);
  r.set_is_kernel_using_tensor_core(key.uses_tensor_core);
  r.set_is_op_tensor_core_eligible(key.op_tensor_core_eligible);
  r.set_op_name(key.op_name);
  r.set_occurrences(static_cast<uint32_t>(std::min<uint64_t>(totals.occurrences, UINT32_MAX)));
  r.set_occupancy_pct(totals.occupancy_pct);
  return r;
}

podscope::v1::KernelStatsPart KernelStatsBuilder::take_part() && {
  end_file();
  std::vector<std::pair<const Key*, const Totals*>> rows;
  rows.reserve(reports_.size());
  for (const auto& [key, totals] : reports_) rows.emplace_back(&key, &totals);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first->tied() < b.first->tied(); });
  podscope::v1::KernelStatsPart part;
  for (const auto& [key, totals] : rows) *part.mutable_reports()->add_reports() = report_of(*key, *totals);
  part.set_corrupt_kernel_details(warnings_.corrupt_kernel_details);
  part.set_kernel_launches(launches_);
  part.set_kernel_time_ns(kernel_time_ns_);
  part.set_launches_attributed_by_correlation(attributed_by_correlation_);
  return part;
}

void KernelStatsBuilder::add_part(size_t, const podscope::v1::KernelStatsPart& part) {
  for (const KernelReport& r : part.reports().reports()) {
    Key key;
    key.name = r.name();
    key.launch.registers_per_thread = r.registers_per_thread();
    key.launch.static_shmem_bytes = r.static_shmem_bytes();
    key.launch.dynamic_shmem_bytes = r.dynamic_shmem_bytes();
    for (int d = 0; d < 3 && d < r.block_dim_size(); ++d) key.launch.block[static_cast<size_t>(d)] = r.block_dim(d);
    for (int d = 0; d < 3 && d < r.grid_dim_size(); ++d) key.launch.grid[static_cast<size_t>(d)] = r.grid_dim(d);
    key.uses_tensor_core = r.is_kernel_using_tensor_core();
    key.op_tensor_core_eligible = r.is_op_tensor_core_eligible();
    key.op_name = r.op_name();
    Totals& totals = reports_[std::move(key)];
    totals.min_ns =
        totals.occurrences == 0 ? r.min_duration_ns() : std::min<uint64_t>(totals.min_ns, r.min_duration_ns());
    totals.max_ns = std::max<uint64_t>(totals.max_ns, r.max_duration_ns());
    totals.total_ns += r.total_duration_ns();
    totals.occupancy_pct = std::max(totals.occupancy_pct, r.occupancy_pct());
    totals.occurrences += r.occurrences();
  }
  warnings_.corrupt_kernel_details += part.corrupt_kernel_details();
  launches_ += part.kernel_launches();
  kernel_time_ns_ += part.kernel_time_ns();
  attributed_by_correlation_ += part.launches_attributed_by_correlation();
}

KernelStatsResult xplane_to_kernel_stats(const XPlane& plane) {
  KernelStatsBuilder builder;
  builder.add_plane(plane);
  return std::move(builder).finish(SIZE_MAX);
}

}  // namespace podscope::analysis
