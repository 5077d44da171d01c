#include "kineto/trace_converter.h"

#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kineto/trace_json_splitter.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"

namespace podscope::kineto {
namespace {

namespace od = simdjson::ondemand;

static_assert(TraceJsonSplitter::kWindowPadding >= simdjson::SIMDJSON_PADDING, "windows carry simdjson's padding");

// Debian's abseil does not alias absl::string_view to std::string_view.
absl::string_view av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Stats of the collectives a Kineto trace records (their process group, its sizes and backend) and of where the
// steps came from.
constexpr std::string_view kProcessGroupStat = "process_group";
constexpr std::string_view kGroupSizeStat = "group_size";
constexpr std::string_view kWorldSizeStat = "world_size";
constexpr std::string_view kBackendStat = "backend";
constexpr std::string_view kStepSourceStat = "step_source";

constexpr std::string_view kProfilerStepPrefix = "ProfilerStep#";
constexpr std::string_view kOptimizerStepPrefix = "Optimizer.step#";

// |µs| beyond this would overflow int64 ns once the base (up to ~2^62 ns) is added.
constexpr double kMaxAbsMicros = 4e15;

// Kineto's "Input type" / record_param_comms "dtype" spellings → bytes per element (0: unknown).
int64_t element_bytes(std::string_view type) {
  static const absl::flat_hash_map<absl::string_view, int64_t> sizes = {{"float", 4},
                                                                        {"Float", 4},
                                                                        {"double", 8},
                                                                        {"Double", 8},
                                                                        {"c10::Half", 2},
                                                                        {"Half", 2},
                                                                        {"BFloat16", 2},
                                                                        {"c10::BFloat16", 2},
                                                                        {"long", 8},
                                                                        {"Long", 8},
                                                                        {"long int", 8},
                                                                        {"int", 4},
                                                                        {"Int", 4},
                                                                        {"short", 2},
                                                                        {"Short", 2},
                                                                        {"Byte", 1},
                                                                        {"Char", 1},
                                                                        {"unsigned char", 1},
                                                                        {"signed char", 1},
                                                                        {"bool", 1},
                                                                        {"Bool", 1},
                                                                        {"char", 1},
                                                                        {"c10::complex<float>", 8},
                                                                        {"ComplexFloat", 8}};
  const auto it = sizes.find(av(type));
  return it == sizes.end() ? 0 : it->second;
}

// "[0, 1, 2]" → "0,1,2": the pod analysis' replica group spelling.
std::string ranks_list(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == ' ' || c == '[' || c == ']') continue;
    out += c;
  }
  return out;
}

// The arguments of one event that the converter reads, whatever the event's kind.
struct EventArgs {
  int64_t external_id = -1;
  int64_t correlation = -1;
  int64_t device = -1;
  int64_t stream = -1;
  int64_t context = 0;
  int64_t registers = 0;
  int64_t shared_memory = 0;
  int64_t grid[3] = {0, 0, 0};
  int64_t block[3] = {0, 0, 0};
  int64_t bytes = -1;
  int64_t in_nelems = -1;
  int64_t out_nelems = -1;
  int64_t group_size = -1;
  int64_t first_input_elements = -1;
  std::string_view collective_name, dtype, process_group, process_group_ranks, first_input_type, label;
};

class Parser {
 public:
  explicit Parser(KinetoTrace& trace) : trace_(trace) {}

  // One window of whole events, `[e1,e2,...]` (trace_json_splitter.h).
  absl::Status parse_window(std::string_view events) {
    try {
      od::document doc =
          parser_.iterate(events.data(), events.size(), events.size() + TraceJsonSplitter::kWindowPadding);
      for (od::value value : doc.get_array()) {
        parse_event(value.get_object());
        if (!error_.ok()) return error_;
        ++event_index_;
      }
    } catch (const simdjson::simdjson_error& e) {
      return invalid(absl::StrCat(" at event ", event_index_), e);
    }
    return absl::OkStatus();
  }

  // The trace's other fields that the converter reads, with its traceEvents arrays left empty (their events came in
  // windows).
  absl::Status parse_fields(std::string_view fields) {
    try {
      od::document doc =
          parser_.iterate(fields.data(), fields.size(), fields.size() + TraceJsonSplitter::kWindowPadding);
      bool has_events = false;
      for (od::field field : doc.get_object()) {
        const od::raw_json_string key = field.key();
        if (key == "traceEvents") {
          has_events = true;
          const od::array events = field.value().get_array();  // empty: the events came in windows
          (void)events;
        } else if (key == "baseTimeNanoseconds") {
          trace_.base_time_ns = field.value().get_int64();
        } else if (key == "distributedInfo") {
          parse_distributed_info(field.value().get_object());
        }
      }
      if (!has_events) return absl::InvalidArgumentError("not a Kineto trace: no traceEvents array");
    } catch (const simdjson::simdjson_error& e) {
      return invalid("", e);
    }
    return absl::OkStatus();
  }

 private:
  static absl::Status invalid(std::string_view where, const simdjson::simdjson_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("Kineto trace is not valid JSON of the expected shape", av(where),
                                                   ": ", simdjson::error_message(e.error())));
  }

  uint32_t intern(std::string_view name) {
    auto [it, inserted] = name_ids_.try_emplace(av(name), static_cast<uint32_t>(trace_.names.size()));
    if (inserted) trace_.names.emplace_back(name);
    return it->second;
  }

  void parse_distributed_info(od::object info) {
    for (od::field field : info) {
      const od::raw_json_string key = field.key();
      if (key == "rank") trace_.rank = field.value().get_int64();
      else if (key == "world_size") trace_.world_size = field.value().get_int64();
      else if (key == "backend") trace_.backend = std::string(text_of(field.value()));
    }
  }

  // A string's text. Strings without escapes (nearly all) are read in place; unescaping every one would write a
  // copy of them all into the parser's string buffer, as large again as the trace's strings.
  static std::string_view text_of(od::value v) {
    if (v.type() != od::json_type::string) throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
    const std::string_view raw = v.raw_json_token();
    size_t end = 1;  // a plain loop: find_first_of calls memchr once per byte
    while (end < raw.size() && raw[end] != '"' && raw[end] != '\\') ++end;
    if (end < raw.size() && raw[end] == '"') return raw.substr(1, end - 1);
    return v.get_string();
  }

  static int64_t int_of(od::value v) {
    // Some Kineto versions write integral arguments as doubles.
    if (v.get_number_type() == od::number_type::floating_point_number) {
      const double d = v.get_double();
      if (!std::isfinite(d) || std::fabs(d) > 9e18) throw simdjson::simdjson_error(simdjson::NUMBER_OUT_OF_RANGE);
      return static_cast<int64_t>(d);
    }
    return v.get_int64();
  }

  static void read_triple(od::value v, int64_t (&out)[3]) {
    int i = 0;
    for (od::value e : v.get_array()) {
      const int64_t x = int_of(e);
      if (i < 3) out[i] = x;
      ++i;
    }
  }

  void parse_args(od::object args, EventArgs& a, bool want_inputs) {
    for (od::field field : args) {
      const od::raw_json_string key = field.key();
      od::value v = field.value();
      if (key == "External id") a.external_id = int_of(v);
      else if (key == "correlation") a.correlation = int_of(v);
      else if (key == "device") a.device = int_of(v);
      else if (key == "stream") a.stream = int_of(v);
      else if (key == "context") a.context = int_of(v);
      else if (key == "registers per thread") a.registers = int_of(v);
      else if (key == "shared memory") a.shared_memory = int_of(v);
      else if (key == "grid") read_triple(v, a.grid);
      else if (key == "block") read_triple(v, a.block);
      else if (key == "bytes") a.bytes = int_of(v);
      else if (key == "In msg nelems") a.in_nelems = int_of(v);
      else if (key == "Out msg nelems") a.out_nelems = int_of(v);
      else if (key == "Group size") a.group_size = int_of(v);
      else if (key == "Collective name") a.collective_name = text_of(v);
      else if (key == "dtype") a.dtype = text_of(v);
      else if (key == "Process Group Name") a.process_group = text_of(v);
      else if (key == "Process Group Ranks") a.process_group_ranks = text_of(v);
      else if (key == "name" || key == "labels") a.label = text_of(v);
      else if (want_inputs && key == "Input Dims") a.first_input_elements = first_input_elements(v);
      else if (want_inputs && key == "Input type") a.first_input_type = first_string(v);
    }
  }

  static int64_t first_input_elements(od::value dims) {
    for (od::value tensor : dims.get_array()) {
      int64_t elements = 1;
      for (od::value d : tensor.get_array()) {
        const int64_t x = int_of(d);
        if (x < 0 || (x > 0 && elements > INT64_MAX / x)) return -1;
        elements *= x;
      }
      return elements;
    }
    return -1;
  }

  static std::string_view first_string(od::value list) {
    for (od::value e : list.get_array()) return text_of(e);
    return {};
  }

  int64_t to_ns(double micros) {
    if (!std::isfinite(micros) || std::fabs(micros) > kMaxAbsMicros) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat("Kineto trace event ", event_index_, " has a time out of range: ", micros, " µs"));
      return 0;
    }
    return std::llround(micros * 1000.0);
  }

  void parse_event(od::object event) {
    std::string_view ph, cat, name;
    std::optional<int64_t> pid, tid;
    double ts = 0, dur = 0;
    EventArgs args;
    for (od::field field : event) {
      const od::raw_json_string key = field.key();
      od::value v = field.value();
      if (key == "ph") ph = text_of(v);
      else if (key == "cat") cat = text_of(v);
      else if (key == "name") name = text_of(v);
      else if (key == "pid" || key == "tid") {
        // Kineto names its own spans' "processes" with strings ("Spans", "Traces"): they are no threads.
        if (v.type() == od::json_type::number) (key == "pid" ? pid : tid) = int_of(v);
      } else if (key == "ts") ts = v.get_double();
      else if (key == "dur") dur = v.get_double();
      else if (key == "args") {
        const bool want_inputs = name.starts_with("nccl:") || name.starts_with("gloo:");
        parse_args(v.get_object(), args, want_inputs);
      }
    }
    if (ph == "M") return add_metadata(name, pid, tid, args);
    if (ph != "X" || !pid || !tid) {
      ++trace_.skipped_events;
      return;
    }
    TraceEvent e;
    e.cpu_op = cat == "cpu_op";
    if (cat == "cpu_op" || cat == "user_annotation" || cat == "python_function") e.kind = EventKind::kHostOp;
    else if (cat == "cuda_runtime" || cat == "cuda_driver") e.kind = EventKind::kRuntime;
    else if (cat == "kernel") e.kind = EventKind::kKernel;
    else if (cat == "gpu_memcpy") e.kind = EventKind::kMemcpy;
    else if (cat == "gpu_memset") e.kind = EventKind::kMemset;
    else {
      ++trace_.skipped_events;
      return;
    }
    e.start_ns = to_ns(ts);
    e.duration_ns = to_ns(dur);
    if (!error_.ok()) return;
    if (e.duration_ns < 0) {
      ++trace_.negative_durations;
      e.duration_ns = 0;
    }
    e.name = intern(name);
    e.order = static_cast<uint32_t>(trace_.events.size());
    e.pid = *pid;
    e.tid = *tid;
    e.correlation = args.correlation;
    switch (e.kind) {
      case EventKind::kKernel: add_kernel(e, args); break;
      case EventKind::kMemcpy:
      case EventKind::kMemset:
        if (args.device >= 0) e.pid = args.device;
        if (args.stream >= 0) e.tid = args.stream;
        e.detail = static_cast<uint32_t>(trace_.copies.size());
        trace_.copies.push_back({args.bytes, args.external_id});
        break;
      case EventKind::kHostOp:
        if (args.external_id >= 0 && cat != "python_function") {
          trace_.ops_by_external_id.try_emplace(args.external_id, e.name);
        }
        add_collective(e, name, args);
        break;
      case EventKind::kRuntime: break;
    }
    trace_.events.push_back(e);
  }

  void add_kernel(TraceEvent& e, const EventArgs& a) {
    if (a.device >= 0) e.pid = a.device;
    if (a.stream >= 0) e.tid = a.stream;
    KernelLaunch k;
    k.external_id = a.external_id;
    k.context = a.context;
    k.registers = a.registers;
    k.shared_memory = a.shared_memory;
    std::copy(std::begin(a.grid), std::end(a.grid), k.grid);
    std::copy(std::begin(a.block), std::end(a.block), k.block);
    if (!a.collective_name.empty()) k.collective = intern(a.collective_name);
    e.detail = static_cast<uint32_t>(trace_.kernels.size());
    trace_.kernels.push_back(k);
  }

  // record_param_comms says what a collective moves; nccl:* and gloo:* annotations name it, and their first input
  // tells its size.
  void add_collective(TraceEvent& e, std::string_view name, const EventArgs& a) {
    Collective c;
    c.external_id = a.external_id;
    if (name == "record_param_comms") {
      if (a.collective_name.empty()) return;  // older PyTorch: no arguments to tell
      c.name = intern(a.collective_name);
      const int64_t elements = std::max(a.in_nelems, a.out_nelems);
      const int64_t size = element_bytes(a.dtype);
      if (elements >= 0 && size > 0 && elements <= INT64_MAX / size) c.bytes = elements * size;
      if (!a.process_group.empty()) c.process_group = intern(a.process_group);
      if (!a.process_group_ranks.empty()) c.ranks = intern(ranks_list(a.process_group_ranks));
      c.group_size = a.group_size;
    } else if (name.starts_with("nccl:") || name.starts_with("gloo:")) {
      c.name = intern(name.substr(5));
      const int64_t size = element_bytes(a.first_input_type);
      if (a.first_input_elements >= 0 && size > 0 && a.first_input_elements <= INT64_MAX / size) {
        c.bytes = a.first_input_elements * size;
      }
    } else {
      return;
    }
    e.detail = static_cast<uint32_t>(trace_.collectives.size());
    trace_.collectives.push_back(c);
  }

  void add_metadata(std::string_view name, std::optional<int64_t> pid, std::optional<int64_t> tid,
                    const EventArgs& args) {
    if (name == "thread_name" && pid && tid && !args.label.empty()) {
      trace_.thread_names[{*pid, *tid}] = std::string(args.label);
    }
  }

  KinetoTrace& trace_;
  od::parser parser_;  // one for every window: its buffers sized once, for the largest
  absl::flat_hash_map<std::string, uint32_t> name_ids_;
  absl::Status error_;
  uint64_t event_index_ = 0;
};

// ---- Building the planes ----

struct HostStep {
  int64_t number = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

std::optional<int64_t> number_after(std::string_view name, std::string_view prefix) {
  if (!name.starts_with(prefix)) return std::nullopt;
  std::string_view digits = name.substr(prefix.size());
  if (digits.empty() || digits.size() > 18) return std::nullopt;
  int64_t n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + (c - '0');
  }
  return n;
}

// How many events the streamed build adds between two flushes of its planes to the wire: what it holds as objects.
constexpr size_t kEventsPerFlush = size_t{1} << 15;

class Builder {
 public:
  // `streamed`: every plane is serialized as it is built (XPlaneStreamWriter), a batch of events at a time, for
  // take_bytes(); otherwise the planes stay in `space`.
  Builder(KinetoTrace&& trace, tensorflow::profiler::XSpace& space, bool streamed)
      : t_(std::move(trace)), space_(space), streamed_(streamed) {}

  void build() {
    for (TraceEvent& e : t_.events) e.start_ns = saturating_add(e.start_ns, t_.base_time_ns);
    // Lines take their events in time order (an earlier event would rebase the line's others); events that start
    // together keep the trace's order. In place: a stable sort's buffer would hold half the events again.
    std::sort(t_.events.begin(), t_.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
      return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.order < b.order;
    });
    find_steps();
    find_stream_kinds();
    bool has_device_work = false;
    for (const TraceEvent& e : t_.events) has_device_work |= is_device(e.kind);
    size_t added = 0;
    for (const TraceEvent& e : t_.events) {
      if (streamed_ && ++added % kEventsPerFlush == 0) flush();
      add_event(e, has_device_work);
    }
    if (has_device_work) {
      add_device_steps();
      add_host_collectives();
    } else {
      add_cpu_core_lines();
    }
    free_records();
    finish_planes();
  }

  // The streamed planes as a serialized XSpace, its warnings after them (as protobuf writes the whole).
  std::string take_bytes() {
    std::string bytes;
    for (const auto& writer : writers_) writer->finish(bytes);
    tensorflow::profiler::XSpace rest;
    rest.mutable_warnings()->Swap(space_.mutable_warnings());
    rest.AppendToString(&bytes);
    return bytes;
  }

 private:
  static bool is_device(EventKind k) {
    return k == EventKind::kKernel || k == EventKind::kMemcpy || k == EventKind::kMemset;
  }

  static int64_t saturating_add(int64_t a, int64_t b) {
    int64_t s = 0;
    if (__builtin_add_overflow(a, b, &s)) return b < 0 ? INT64_MIN : INT64_MAX;
    return s;
  }

  std::string_view name(uint32_t id) const { return t_.names[id]; }

  // Steps: ProfilerStep#N where torch.profiler's schedule marked them; else the optimizer's step annotations, each
  // closing a step that began where the one before it ended (the first closes a step whose start is unknown: left
  // out).
  void find_steps() {
    for (const TraceEvent& e : t_.events) {
      if (e.kind != EventKind::kHostOp) continue;
      if (auto n = number_after(name(e.name), kProfilerStepPrefix)) {
        steps_.push_back({*n, e.start_ns, e.start_ns + e.duration_ns});
      }
    }
    if (!steps_.empty()) {
      step_source_ = "ProfilerStep";
      return;
    }
    std::optional<uint32_t> optimizer;  // the first optimizer's annotations only: one per step
    std::vector<int64_t> ends;
    for (const TraceEvent& e : t_.events) {
      if (e.kind != EventKind::kHostOp || !name(e.name).starts_with(kOptimizerStepPrefix)) continue;
      if (!optimizer) optimizer = e.name;
      if (e.name == *optimizer) ends.push_back(e.start_ns + e.duration_ns);
    }
    for (size_t i = 1; i < ends.size(); ++i)
      steps_.push_back({static_cast<int64_t>(i), ends[i - 1], std::max(ends[i - 1], ends[i])});
    if (!steps_.empty()) step_source_ = "Optimizer.step";
  }

  // The host step (index) an instant falls in.
  std::optional<size_t> step_at(int64_t t) const {
    auto it =
        std::upper_bound(steps_.begin(), steps_.end(), t, [](int64_t v, const HostStep& s) { return v < s.start_ns; });
    if (it == steps_.begin()) return std::nullopt;
    --it;
    if (t >= it->end_ns) return std::nullopt;
    return static_cast<size_t>(it - steps_.begin());
  }

  xspace::XPlaneBuilder& plane(std::string name, int64_t id) {
    auto& slot = planes_[name];
    if (!slot) {
      tensorflow::profiler::XPlane* p = xspace::find_or_add_plane(space_, name, id);
      slot = std::make_unique<xspace::XPlaneBuilder>(p);
      if (streamed_) writers_.push_back(std::make_unique<xspace::XPlaneStreamWriter>(*p));
    }
    return *slot;
  }

  void flush() {
    for (const auto& writer : writers_) writer->flush_events();
  }

  // What the planes are built from, freed once they are built: the streamed planes are finished without it.
  void free_records() {
    t_.events = {};
    t_.kernels = {};
    t_.copies = {};
    t_.ops_by_external_id = {};
    t_.collectives = {};
    t_.thread_names = {};
    launch_ns_ = {};
    comms_by_external_id_ = {};
    device_ops_ = {};
    input_stages_ = {};
    host_collectives_ = {};
    thread_lines_ = {};
    stream_lines_ = {};
  }

  xspace::XPlaneBuilder& gpu_plane(int64_t device) {
    auto [it, inserted] = gpu_planes_.try_emplace(device, nullptr);
    if (inserted) it->second = &plane(absl::StrCat(av(xspace::kGpuPlanePrefix), device), device);
    return *it->second;
  }
  int64_t core_id() const { return t_.rank >= 0 ? t_.rank : 0; }
  xspace::XPlaneBuilder& host_plane(bool has_device_work) {
    if (!host_plane_) {
      host_plane_ = has_device_work ? &plane(std::string(xspace::kHostPlaneName), 0)
                                    : &plane(absl::StrCat(av(xspace::kCustomPlanePrefix), core_id()), core_id());
    }
    return *host_plane_;
  }

  std::string thread_line_name(int64_t pid, int64_t tid) const {
    if (auto it = t_.thread_names.find({pid, tid}); it != t_.thread_names.end()) return it->second;
    return absl::StrCat("Thread ", tid);
  }

  // A host thread's line, named once when it is created.
  xspace::XLineBuilder thread_line(xspace::XPlaneBuilder& p, int64_t pid, int64_t tid) {
    auto [it, inserted] = thread_lines_.try_emplace({&p, tid}, nullptr);
    if (inserted) it->second = p.line(tid, thread_line_name(pid, tid)).proto();
    return xspace::XLineBuilder(it->second, &p);
  }

  void add_event(const TraceEvent& e, bool has_device_work) {
    switch (e.kind) {
      case EventKind::kHostOp: add_host_op(e, host_plane(has_device_work), has_device_work); break;
      case EventKind::kRuntime: {
        if (!cupti_plane_) cupti_plane_ = &plane(std::string(xspace::kCuptiHostPlaneName), 0);
        auto& p = *cupti_plane_;
        auto stats = thread_line(p, e.pid, e.tid).add_event(name(e.name), e.start_ns, e.duration_ns);
        if (e.correlation >= 0) {
          stats.add(xspace::kCorrelationIdStat, e.correlation);
          launch_ns_[e.correlation] = e.start_ns;
        }
        break;
      }
      case EventKind::kKernel:
      case EventKind::kMemcpy:
      case EventKind::kMemset: add_device_op(e); break;
    }
  }

  void add_host_op(const TraceEvent& e, xspace::XPlaneBuilder& p, bool has_device_work) {
    std::string_view event_name = name(e.name);
    const Collective* c = e.detail == UINT32_MAX ? nullptr : &t_.collectives[e.detail];
    // Without a device, a rank's collectives are its core's ops: named as the pod analysis reads collectives. The
    // record_param_comms around an annotation describes the same collective: only the annotation is renamed.
    const bool annotation = event_name.starts_with("nccl:") || event_name.starts_with("gloo:");
    if (!has_device_work && c && annotation) {
      if (std::string_view xla = xla_collective_name(name(c->name)); !xla.empty()) event_name = xla;
    }
    const std::optional<int64_t> step_num = number_after(name(e.name), kProfilerStepPrefix);
    if (!has_device_work) {
      // A CPU-only rank's steps are its core's Steps line, not ops of the core.
      if (step_num) return;
      if (event_name.starts_with(xspace::kTorchDataLoaderPrefix)) return input_stages_.push_back(&e);
    }
    const int64_t metadata_id = p.event_metadata_id(event_name);
    auto stats = thread_line(p, e.pid, e.tid).add_event(metadata_id, e.start_ns, e.duration_ns);
    if (step_num) stats.add(xspace::kStepNumStat, *step_num);
    // On a GPU rank the ATen ops are the host side's framework ops (framework op stats): their metadata names
    // the op, as a device op's event names the op that launched it. A CPU-only rank's are its core's ops already.
    if (has_device_work && e.cpu_op && host_framework_ops_.insert(metadata_id).second) {
      xspace::XStatsBuilder((*p.proto()->mutable_event_metadata())[metadata_id].mutable_stats(), &p)
          .add(xspace::kFrameworkOpStat, event_name);
    }
    // The host's work within a step is the step's host compute (TF groups its host events so, with the step's
    // id), which the step tools count where the device idles. The step marker too: between its ops the host thread
    // runs the step's Python, which torch.profiler records only with `with_stack`.
    if (has_device_work) {
      if (const std::optional<size_t> step = step_at(e.start_ns)) stats.add(xspace::kGroupIdStat, steps_[*step].number);
    }
    if (!c) return;
    // A CPU backend's collective on a GPU rank: the GPU waits for it (NCCL's run as kernels instead).
    if (has_device_work && annotation && name(e.name).starts_with("gloo:")) host_collectives_.push_back(&e);
    add_collective_stats(stats, *c);
    if (name(e.name) == "record_param_comms" && c->external_id >= 0) comms_by_external_id_[c->external_id] = e.detail;
  }

  void add_collective_stats(xspace::XStatsBuilder& stats, const Collective& c) {
    stats.add(xspace::kCollectiveStat, name(c.name));
    if (c.bytes >= 0) stats.add(xspace::kBytesStat, c.bytes);
    if (c.process_group != UINT32_MAX) stats.add(kProcessGroupStat, name(c.process_group));
    if (c.ranks != UINT32_MAX) stats.add(xspace::kReplicaGroupStat, name(c.ranks));
    if (c.group_size >= 0) stats.add(kGroupSizeStat, c.group_size);
  }

  static std::string_view copy_kind(std::string_view name) {
    if (name.find("HtoD") != std::string_view::npos) return "MemcpyH2D";
    if (name.find("DtoH") != std::string_view::npos) return "MemcpyD2H";
    if (name.find("DtoD") != std::string_view::npos) return "MemcpyD2D";
    if (name.find("PtoP") != std::string_view::npos) return "MemcpyP2P";
    return "Memcpy";
  }

  std::string_view device_op_kind(const TraceEvent& e) const {
    return e.kind == EventKind::kKernel ? "Compute" : e.kind == EventKind::kMemset ? "Memset" : copy_kind(name(e.name));
  }

  // Each stream's kinds of work, which name its line: known before its first event, so that the line is named when
  // it is made (a streamed line's name goes to the wire with its first events).
  void find_stream_kinds() {
    for (const TraceEvent& e : t_.events) {
      if (is_device(e.kind)) stream_kinds_[{e.pid, e.tid}].insert(device_op_kind(e));
    }
  }

  xspace::XLineBuilder stream_line(xspace::XPlaneBuilder& p, int64_t device, int64_t stream) {
    auto [it, inserted] = stream_lines_.try_emplace({device, stream}, nullptr);
    if (inserted) it->second = p.line(stream, stream_line_name(stream, stream_kinds_[{device, stream}])).proto();
    return xspace::XLineBuilder(it->second, &p);
  }

  void add_device_op(const TraceEvent& e) {
    auto& p = gpu_plane(e.pid);
    auto line = stream_line(p, e.pid, e.tid);
    auto stats = line.add_event(name(e.name), e.start_ns, e.duration_ns);
    if (e.kind == EventKind::kKernel) {
      const KernelLaunch& k = t_.kernels[e.detail];
      add_ref_stat(
          p, *line.proto(), xspace::kKernelDetailsStat,
          absl::StrCat("regs:", k.registers, " static_shared:", k.shared_memory, " dynamic_shared:0 grid:", k.grid[0],
                       ",", k.grid[1], ",", k.grid[2], " block:", k.block[0], ",", k.block[1], ",", k.block[2]));
      stats.add(xspace::kContextIdStat, k.context);
      add_nccl_stats(stats, e, k);
      add_framework_op(p, *line.proto(), k.external_id);
    } else {
      const DeviceCopy& copy = t_.copies[e.detail];
      if (copy.bytes >= 0) stats.add(xspace::kBytesStat, copy.bytes);
      add_framework_op(p, *line.proto(), copy.external_id);
    }
    if (e.correlation >= 0) stats.add(xspace::kCorrelationIdStat, e.correlation);
    stats.add(xspace::kStreamIdStat, e.tid);
    device_ops_.push_back({e.pid, e.correlation, e.start_ns, e.start_ns + e.duration_ns});
  }

  // The PyTorch op that launched the line's last device op: the host op with its External id.
  void add_framework_op(xspace::XPlaneBuilder& p, tensorflow::profiler::XLine& line, int64_t external_id) {
    if (external_id < 0) return;
    if (auto it = t_.ops_by_external_id.find(external_id); it != t_.ops_by_external_id.end()) {
      add_ref_stat(p, line, xspace::kFrameworkOpStat, name(it->second));
    }
  }

  // Kernel launch parameters repeat across launches: each distinct text is stored once, as a referenced stat.
  static void add_ref_stat(xspace::XPlaneBuilder& p, tensorflow::profiler::XLine& line, std::string_view stat,
                           std::string_view value) {
    tensorflow::profiler::XStat* s = line.mutable_events(line.events_size() - 1)->add_stats();
    s->set_metadata_id(p.stat_metadata_id(stat));
    s->set_ref_value(static_cast<uint64_t>(p.stat_metadata_id(value)));
  }

  void add_nccl_stats(xspace::XStatsBuilder& stats, const TraceEvent& e, const KernelLaunch& k) {
    std::string_view collective = k.collective == UINT32_MAX ? std::string_view() : name(k.collective);
    if (collective.empty()) collective = nccl_kernel_collective(name(e.name));
    if (collective.empty()) return;
    // The record_param_comms that launched it shares its External id and says what it moved.
    if (auto it = comms_by_external_id_.find(k.external_id); k.external_id >= 0 && it != comms_by_external_id_.end()) {
      add_collective_stats(stats, t_.collectives[it->second]);
      return;
    }
    stats.add(xspace::kCollectiveStat, collective);
  }

  static std::string_view nccl_kernel_collective(std::string_view kernel) {
    for (std::string_view prefix : {"ncclDevKernel_", "ncclKernel_"}) {
      if (!kernel.starts_with(prefix)) continue;
      std::string_view rest = kernel.substr(prefix.size());
      return rest.substr(0, rest.find_first_of("_("));
    }
    return {};
  }

  struct DeviceOp {
    int64_t device;
    int64_t correlation;
    int64_t start_ns;
    int64_t end_ns;
  };

  // A device's step k runs from the host's step k start to the end of the last of its ops launched in that host
  // step (the device runs behind the host), at least to the host step's end.
  void add_device_steps() {
    std::map<int64_t, std::vector<int64_t>> step_ends;  // device → end per step
    for (const auto& [key, kinds] : stream_kinds_) {
      auto& ends = step_ends[key.first];
      ends.resize(steps_.size());
      for (size_t i = 0; i < steps_.size(); ++i) ends[i] = steps_[i].end_ns;
    }
    for (const DeviceOp& op : device_ops_) {
      const auto launch = launch_ns_.find(op.correlation);
      const std::optional<size_t> step = step_at(launch == launch_ns_.end() ? op.start_ns : launch->second);
      if (!step) continue;
      int64_t& end = step_ends[op.device][*step];
      end = std::max(end, op.end_ns);
    }
    for (auto& [device, ends] : step_ends) {
      auto line = gpu_plane(device).line_named(xspace::kStepsLineName);
      for (size_t i = 0; i < steps_.size(); ++i) {
        line.add_event(absl::StrCat(steps_[i].number), steps_[i].start_ns, ends[i] - steps_[i].start_ns)
            .add(xspace::kStepNumStat, steps_[i].number);
      }
    }
  }

  // The rank's GPU (its core, when it has one) gets the host collectives it waited for, named as the pod analysis
  // reads collectives.
  void add_host_collectives() {
    if (host_collectives_.empty() || gpu_planes_.size() != 1) return;
    xspace::XPlaneBuilder& p = *gpu_planes_.begin()->second;
    auto line = p.line_named(xspace::kHostCollectivesLineName);
    for (const TraceEvent* e : host_collectives_) {
      const Collective& c = t_.collectives[e->detail];
      std::string_view op = xla_collective_name(name(c.name));
      auto stats = line.add_event(op.empty() ? name(e->name) : op, e->start_ns, e->duration_ns);
      add_collective_stats(stats, c);
    }
  }

  // A CPU-only rank's own lines, added once every thread has its line (line id = tid), so that each takes an id no
  // thread has: an on-demand trace can start with a thread whose id is one below another thread's.
  void add_cpu_core_lines() {
    auto& p = host_plane(false);
    add_input_stages(p);
    auto line = p.line_named(xspace::kStepsLineName);
    for (const HostStep& s : steps_) {
      line.add_event(absl::StrCat(s.number), s.start_ns, s.end_ns - s.start_ns).add(xspace::kStepNumStat, s.number);
    }
  }

  // The DataLoader's calls are the core's input: root stages of its `Input Pipeline` line, as the step tools read
  // annotated input stages (each call a stage of its own).
  void add_input_stages(xspace::XPlaneBuilder& p) {
    if (input_stages_.empty()) return;
    auto line = p.line_named(xspace::kInputPipelineLineName);
    int64_t stage_id = 0;
    for (const TraceEvent* e : input_stages_) {
      line.add_event(name(e->name), e->start_ns, e->duration_ns)
          .add(xspace::kInputStageIdStat, ++stage_id)
          .add(xspace::kInputStageParentIdStat, int64_t{0});
    }
  }

  std::string stream_line_name(int64_t stream, const std::set<std::string_view>& kinds) {
    static constexpr std::string_view kOrder[] = {"Compute",   "MemcpyH2D", "MemcpyD2H", "MemcpyD2D",
                                                  "MemcpyP2P", "Memcpy",    "Memset"};
    std::string joined;
    for (std::string_view kind : kOrder) {
      if (!kinds.contains(kind)) continue;
      if (!joined.empty()) joined += ',';
      joined += kind;
    }
    return absl::StrCat("Stream #", stream, "(", joined, ")");
  }

  void finish_planes() {
    for (auto& [plane_name, p] : planes_) {
      if (std::string_view(plane_name).starts_with(xspace::kGpuPlanePrefix)) {
        p->stats().add(xspace::kDeviceIdStat, p->proto()->id());
        // One process, one GPU (PyTorch's convention): the GPU is the rank's core, named by its rank as a CPU-only
        // rank's core is, also where several ranks' GPUs share a host plane (a live capture).
        if (t_.rank >= 0 && gpu_planes_.size() == 1) {
          p->stats().add(xspace::kRankStat, t_.rank);
          p->stats().add(xspace::kHostNameStat, absl::StrCat("rank ", t_.rank));
        }
      }
      const bool core_plane =
          plane_name == xspace::kHostPlaneName || std::string_view(plane_name).starts_with(xspace::kCustomPlanePrefix);
      if (!core_plane) continue;
      // Kineto does not record the host: the rank names it, so each rank is a host row of the pod.
      if (t_.rank >= 0) {
        p->stats().add(xspace::kHostNameStat, absl::StrCat("rank ", t_.rank));
        p->stats().add(xspace::kRankStat, t_.rank);
      }
      if (t_.world_size >= 0) p->stats().add(kWorldSizeStat, t_.world_size);
      if (!t_.backend.empty()) p->stats().add(kBackendStat, t_.backend);
      if (!step_source_.empty()) p->stats().add(kStepSourceStat, step_source_);
    }
    if (steps_.empty()) {
      space_.add_warnings(
          "Kineto trace: no steps (no ProfilerStep#N and no Optimizer.step annotations); mark steps with "
          "torch.profiler's schedule and prof.step(), or torch.profiler.record_function(\"ProfilerStep#<n>\")");
    }
    if (t_.negative_durations > 0) {
      space_.add_warnings(absl::StrCat("Kineto trace: ", t_.negative_durations,
                                       " events with a negative duration, kept with duration 0"));
    }
  }

  KinetoTrace t_;
  tensorflow::profiler::XSpace& space_;
  const bool streamed_;
  std::map<std::string, std::unique_ptr<xspace::XPlaneBuilder>> planes_;
  std::vector<std::unique_ptr<xspace::XPlaneStreamWriter>> writers_;  // streamed: one per plane, in space order
  absl::flat_hash_map<int64_t, xspace::XPlaneBuilder*> gpu_planes_;
  xspace::XPlaneBuilder* host_plane_ = nullptr;
  absl::flat_hash_set<int64_t> host_framework_ops_;  // host event metadata that names its framework op
  xspace::XPlaneBuilder* cupti_plane_ = nullptr;
  std::vector<const TraceEvent*> input_stages_;  // a CPU-only rank's DataLoader calls, in time order
  std::vector<HostStep> steps_;
  std::string step_source_;
  std::map<std::pair<int64_t, int64_t>, std::set<std::string_view>> stream_kinds_;
  absl::flat_hash_map<std::pair<const xspace::XPlaneBuilder*, int64_t>, tensorflow::profiler::XLine*> thread_lines_;
  absl::flat_hash_map<std::pair<int64_t, int64_t>, tensorflow::profiler::XLine*> stream_lines_;  // (device, stream)
  absl::flat_hash_map<int64_t, int64_t> launch_ns_;  // correlation → launch start
  absl::flat_hash_map<int64_t, uint32_t> comms_by_external_id_;
  std::vector<DeviceOp> device_ops_;
  std::vector<const TraceEvent*> host_collectives_;
};

}  // namespace

std::string_view xla_collective_name(std::string_view c) {
  auto starts = [&](std::string_view p) {
    return c.starts_with(p) || (c.starts_with("_") && c.substr(1).starts_with(p));
  };
  if (starts("all_reduce") || starts("allreduce")) return xspace::kAllReduceEventName;
  if (starts("all_gather") || starts("allgather")) return "all-gather";
  if (starts("reduce_scatter") || starts("reducescatter")) return "reduce-scatter";
  if (starts("all_to_all") || starts("alltoall")) return "all-to-all";
  return {};
}

struct KinetoTraceParser::State {
  KinetoTrace trace;
  Parser parser{trace};
  absl::Status window_status;  // the parse of the last window, whose error names its event
  TraceJsonSplitter splitter{[this](std::string_view events) { return window_status = parser.parse_window(events); },
                             {"baseTimeNanoseconds", "distributedInfo"}};
};

namespace {

// What the splitter found wrong with the text itself.
absl::Status text_error(const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(status.code() == absl::StatusCode::kResourceExhausted
                                                      ? "Kineto trace refused: "
                                                      : "Kineto trace is not valid JSON of the expected shape: ",
                                                  status.message()));
}

}  // namespace

KinetoTraceParser::KinetoTraceParser(uint64_t expected_bytes) : state_(std::make_unique<State>()) {
  // Room for as many events as the text could hold (an event takes more than 48 bytes of JSON): pages are touched
  // only as events fill them, and the vector never grows by copying itself, which would hold it twice.
  state_->trace.events.reserve(expected_bytes / 48);
}

KinetoTraceParser::~KinetoTraceParser() = default;

absl::Status KinetoTraceParser::feed(std::string_view text) {
  const absl::Status status = state_->splitter.feed(text);
  if (status.ok() || !state_->window_status.ok()) return status;
  return text_error(status);
}

absl::StatusOr<KinetoTrace> KinetoTraceParser::finish() {
  absl::StatusOr<std::string_view> fields = state_->splitter.finish();
  if (!fields.ok()) return state_->window_status.ok() ? text_error(fields.status()) : fields.status();
  if (absl::Status s = state_->parser.parse_fields(*fields); !s.ok()) return s;
  return std::move(state_->trace);
}

void build_xspace(KinetoTrace&& trace, tensorflow::profiler::XSpace& space) {
  Builder(std::move(trace), space, /*streamed=*/false).build();
}

std::string build_xspace_bytes(KinetoTrace&& trace) {
  tensorflow::profiler::XSpace space;
  Builder builder(std::move(trace), space, /*streamed=*/true);
  builder.build();
  return builder.take_bytes();
}

absl::StatusOr<tensorflow::profiler::XSpace> convert_kineto_json(std::string_view json) {
  KinetoTraceParser parser(json.size());
  if (absl::Status s = parser.feed(json); !s.ok()) return s;
  absl::StatusOr<KinetoTrace> trace = parser.finish();
  if (!trace.ok()) return trace.status();
  tensorflow::profiler::XSpace space;
  build_xspace(std::move(*trace), space);
  return space;
}

}  // namespace podscope::kineto
