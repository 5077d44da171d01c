#include "analysis/tools/input_pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "analysis/steps/step_events.h"
#include "analysis/steps/step_sampling.h"
#include "analysis/steps/step_spans.h"
#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::InputPipelineAnalysisResult;
using tensorflow::profiler::PerGenericStepDetails;
using tensorflow::profiler::StepSummary;

constexpr char kTypeUrlPrefix[] = "type.googleapis.com/";

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
double percent(int64_t part, int64_t whole) { return whole > 0 ? 100.0 * static_cast<double>(part) / whole : 0.0; }

StepSummary summarize(const std::vector<double>& values) {
  StepSummary s;
  if (values.empty()) return s;
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  s.set_average(mean);
  s.set_standard_deviation(std::sqrt(squares / static_cast<double>(values.size())));
  s.set_minimum(*std::min_element(values.begin(), values.end()));
  s.set_maximum(*std::max_element(values.begin(), values.end()));
  return s;
}

template <typename Message>
void pack(const Message& message, google::protobuf::Any& any) {
  any.set_type_url(absl::StrCat(kTypeUrlPrefix, message.GetDescriptor()->full_name()));
  any.set_value(message.SerializeAsString());
}

PerGenericStepDetails step_details(const PodStep& s) {
  const GenericBreakdown g = generic_breakdown(s.type_ns);
  PerGenericStepDetails d;
  d.set_step_number(static_cast<int32_t>(s.step_num));
  d.set_step_name(std::to_string(s.step_num));
  d.set_step_time_ms(ms(s.duration_ns));
  d.set_unknown_time_ms(ms(g.unknown_ns));
  d.set_host_wait_input_ms(ms(g.host_wait_input_ns));
  d.set_host_to_device_ms(ms(g.host_to_device_ns));
  d.set_output_ms(ms(g.output_ns));
  d.set_device_compute_ms(ms(g.device_compute_ns));
  d.set_device_to_device_ms(ms(g.device_to_device_ns));
  d.set_device_collectives_ms(ms(g.device_collectives_ns));
  d.set_host_compute_ms(ms(g.host_compute_ns));
  d.set_host_prepare_ms(ms(g.host_prepare_ns));
  d.set_host_compile_ms(ms(g.host_compile_ns));
  d.set_core_name(s.longest->name);
  d.set_min_core_wait_input_ms(ms(s.min_wait_ns));
  d.set_max_core_wait_input_ms(ms(s.max_wait_ns));
  d.set_core_count(s.cores);
  d.set_min_core_step_time_ms(ms(s.min_step_ns));
  d.set_max_core_step_time_ms(ms(s.max_step_ns));
  return d;
}

// The step-time graph's steps: all of them up to kMaxStepsShown, else the slowest and the rest evenly spaced.
void add_shown_step_details(const std::vector<PerGenericStepDetails>& details, InputPipelineAnalysisResult& out) {
  std::vector<int64_t> step_ns;
  step_ns.reserve(details.size());
  for (const PerGenericStepDetails& d : details) step_ns.push_back(static_cast<int64_t>(d.step_time_ms() * 1e6));
  const std::vector<bool> shown = steps_shown(step_ns);
  for (size_t i = 0; i < details.size(); ++i) {
    if (shown[i]) pack(details[i], *out.add_step_details());
  }
  out.set_step_count(static_cast<uint32_t>(details.size()));
}

// The device side: per step, summaries, shares and the verdict.
void fill_device_side(const PodSteps& pod, InputPipelineAnalysisResult& out) {
  std::vector<double> step_ms, input_pct, unknown, wait, h2d, input, output, compute, d2d, collectives, host_compute,
      prepare, compile;
  int64_t total_ns = 0, input_ns = 0, output_ns = 0, unknown_ns = 0, compute_ns = 0;
  std::vector<PerGenericStepDetails> details;
  for (const PodStep& s : pod.steps) {
    const PerGenericStepDetails& d = details.emplace_back(step_details(s));
    const GenericBreakdown g = generic_breakdown(s.type_ns);
    step_ms.push_back(d.step_time_ms());
    input_pct.push_back(percent(g.input_ns(), s.duration_ns));
    unknown.push_back(d.unknown_time_ms());
    wait.push_back(d.host_wait_input_ms());
    h2d.push_back(d.host_to_device_ms());
    input.push_back(ms(g.input_ns()));
    output.push_back(d.output_ms());
    compute.push_back(d.device_compute_ms());
    d2d.push_back(d.device_to_device_ms());
    collectives.push_back(d.device_collectives_ms());
    host_compute.push_back(d.host_compute_ms());
    prepare.push_back(d.host_prepare_ms());
    compile.push_back(d.host_compile_ms());
    total_ns += s.duration_ns;
    input_ns += g.input_ns();
    output_ns += g.output_ns;
    unknown_ns += g.unknown_ns;
    compute_ns += g.device_compute_ns;
  }
  add_shown_step_details(details, out);
  *out.mutable_step_time_summary() = summarize(step_ms);
  *out.mutable_input_percent_summary() = summarize(input_pct);
  out.set_input_percent(percent(input_ns, total_ns));
  out.set_output_percent(percent(output_ns, total_ns));
  out.set_idle_percent(percent(unknown_ns, total_ns));
  out.set_compute_percent(percent(compute_ns, total_ns));
  tensorflow::profiler::GenericStepTimeBreakdown breakdown;
  *breakdown.mutable_unknown_time_ms_summary() = summarize(unknown);
  *breakdown.mutable_host_wait_input_ms_summary() = summarize(wait);
  *breakdown.mutable_host_to_device_ms_summary() = summarize(h2d);
  *breakdown.mutable_input_ms_summary() = summarize(input);
  *breakdown.mutable_output_ms_summary() = summarize(output);
  *breakdown.mutable_device_compute_ms_summary() = summarize(compute);
  *breakdown.mutable_device_to_device_ms_summary() = summarize(d2d);
  *breakdown.mutable_device_collectives_ms_summary() = summarize(collectives);
  *breakdown.mutable_host_compute_ms_summary() = summarize(host_compute);
  *breakdown.mutable_host_prepare_ms_summary() = summarize(prepare);
  *breakdown.mutable_host_compile_ms_summary() = summarize(compile);
  pack(breakdown, *out.mutable_step_time_breakdown());
}

// Input ops of the whole pod: host planes' tf.data / input ops and annotated input stages, merged by name.
std::vector<InputOpTotal> pod_input_ops(const PodSteps& pod) {
  std::map<std::string, InputOpTotal> by_name;
  auto add = [&](const podscope::v1::InputOp& op) {
    auto [it, first] =
        by_name.try_emplace(op.name(), InputOpTotal{op.name(), static_cast<InputCategory>(op.category())});
    it->second.count += op.count();
    it->second.time_ns += op.time_ns();
    it->second.self_ns += op.self_ns();
  };
  for (const auto& host : pod.hosts) {
    for (const auto& op : host.host_input_ops()) add(op);
  }
  for (const PodCore& core : pod.cores) {
    for (const auto& stage : core.core->input_stages()) add(stage);
  }
  std::vector<InputOpTotal> ops;
  for (auto& [name, op] : by_name) ops.push_back(std::move(op));
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.self_ns > b.self_ns; });
  return ops;
}

void fill_host_side(const PodSteps& pod, InputPipelineAnalysisResult& out) {
  const std::vector<InputOpTotal> ops = pod_input_ops(pod);
  int64_t total_self = 0;
  for (const InputOpTotal& op : ops) total_self += op.self_ns;
  auto& breakdown = *out.mutable_input_time_breakdown();
  for (const InputOpTotal& op : ops) {
    const double us = static_cast<double>(op.self_ns) / 1e3;
    switch (op.category) {
      case InputCategory::kEnqueue: breakdown.set_enqueue_us(breakdown.enqueue_us() + us); break;
      case InputCategory::kDemandedFileRead:
        breakdown.set_demanded_file_read_us(breakdown.demanded_file_read_us() + us);
        break;
      case InputCategory::kAdvancedFileRead:
        breakdown.set_advanced_file_read_us(breakdown.advanced_file_read_us() + us);
        break;
      case InputCategory::kPreprocessing: breakdown.set_preprocessing_us(breakdown.preprocessing_us() + us); break;
      case InputCategory::kUnclassified:
        breakdown.set_unclassified_non_enqueue_us(breakdown.unclassified_non_enqueue_us() + us);
        break;
    }
    auto* details = out.add_input_op_details();
    details->set_op_name(op.name);
    details->set_count(op.count);
    details->set_time_in_ms(ms(op.time_ns));
    details->set_time_in_percent(percent(op.time_ns, total_self));
    details->set_self_time_in_ms(ms(op.self_ns));
    details->set_self_time_in_percent(percent(op.self_ns, total_self));
    details->set_category(std::string(input_category_name(op.category)));
  }
}

// Hosts by their cores' input share, each with its slowest input stage or op.
void rank_hosts(const PodSteps& pod, InputPipelineAnalysisResult& out) {
  struct HostTotals {
    int64_t step_ns = 0;
    int64_t input_ns = 0;
    int64_t unknown_ns = 0;
    std::map<std::string, int64_t> stage_self_ns;
  };
  std::map<std::string, HostTotals> hosts;
  for (const PodCore& core : pod.cores) {
    if (core.steps.empty()) continue;
    HostTotals& h = hosts[core.host_name];
    for (const podscope::v1::CoreStep* step : core.steps) {
      const EventTypeDurations type_ns = type_ns_of(*step);
      h.step_ns += step->end_ns() - step->start_ns();
      h.input_ns += generic_breakdown(type_ns).input_ns();
      h.unknown_ns += at(type_ns, EventType::kUnknown);
    }
    for (const auto& stage : core.core->input_stages()) h.stage_self_ns[stage.name()] += stage.self_ns();
  }
  for (const auto& host : pod.hosts) {
    auto it = hosts.find(host.host_name());
    if (it == hosts.end()) continue;
    for (const auto& op : host.host_input_ops()) it->second.stage_self_ns[op.name()] += op.self_ns();
  }
  std::vector<tensorflow::profiler::HostInputSummary> ranked;
  for (const auto& [name, h] : hosts) {
    tensorflow::profiler::HostInputSummary s;
    s.set_host_name(name);
    s.set_input_percent(percent(h.input_ns, h.step_ns));
    s.set_verdict(std::string(input_bound_verdict(s.input_percent(), percent(h.unknown_ns, h.step_ns))));
    for (const auto& [stage, self_ns] : h.stage_self_ns) {
      if (ms(self_ns) > s.slowest_stage_self_time_ms()) {
        s.set_slowest_stage(stage);
        s.set_slowest_stage_self_time_ms(ms(self_ns));
      }
    }
    ranked.push_back(std::move(s));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.input_percent() > b.input_percent(); });
  for (auto& s : ranked) *out.add_hosts() = std::move(s);
}

// `slowest_stage`: the most input-bound host's slowest input stage, which says whose input pipeline it is.
std::string input_statement(std::string_view verdict, double input_percent, std::string_view slowest_stage) {
  if (verdict == "HIGHLY") {
    const std::string_view next =
        slowest_stage.starts_with(xspace::kTorchDataLoaderPrefix)
            ? "see the host-side breakdown below: PyTorch's DataLoader loads each batch while the step waits "
              "(worker processes, num_workers, load batches ahead; pin_memory speeds their copy to a GPU)."
            : "see the host-side breakdown below and open `podscope analyze RUN --tool tf_data`.";
    return absl::StrFormat(
        "Your program is HIGHLY input-bound: %.1f %% of the step time waits for input. Reduce the input time first: "
        "%s",
        input_percent, next);
  }
  if (verdict == "MODERATELY") {
    return absl::StrFormat(
        "Your program is MODERATELY input-bound: %.1f %% of the step time waits for input. Look at the host-side "
        "breakdown below, then at the rest of the step time.",
        input_percent);
  }
  if (verdict == "POTENTIALLY") {
    return absl::StrFormat(
        "Your program is POTENTIALLY input-bound: %.1f %% of the step time waits for input, and a share the profile "
        "cannot explain may hide more.",
        input_percent);
  }
  return absl::StrFormat("Your program is NOT input-bound: %.1f %% of the step time waits for input.", input_percent);
}

void recommend(const PodSteps& pod, InputPipelineAnalysisResult& out) {
  auto& recommendation = *out.mutable_recommendation();
  tensorflow::profiler::BottleneckAnalysis bottleneck;
  bottleneck.set_input_percent(out.input_percent());
  bottleneck.set_output_percent(out.output_percent());
  bottleneck.set_idle_percent(out.idle_percent());
  bottleneck.set_compute_percent(out.compute_percent());
  if (out.step_details_size() == 0) {
    bottleneck.set_input_classification("unknown");
    bottleneck.set_input_statement(absl::StrCat(
        "Input-bound: unknown, because ",
        pod.has_steps() ? "every step found was dropped (see the diagnostics)" : no_steps_explanation(), "."));
  } else {
    const std::string_view verdict = input_bound_verdict(out.input_percent(), out.idle_percent());
    bottleneck.set_input_classification(std::string(verdict));
    bottleneck.set_input_statement(
        input_statement(verdict, out.input_percent(), out.hosts_size() > 0 ? out.hosts(0).slowest_stage() : ""));
  }
  recommendation.add_details(bottleneck.input_statement());
  if (out.hosts_size() > 1 || (out.hosts_size() == 1 && out.hosts(0).input_percent() > 0)) {
    const auto& top = out.hosts(0);
    recommendation.add_details(absl::StrFormat(
        "Most input-bound host: %s (%.1f %% input, %s input-bound)%s", top.host_name(), top.input_percent(),
        top.verdict(),
        top.slowest_stage().empty() ? ""
                                    : absl::StrFormat("; its slowest input stage is %s (%.3f ms self time)",
                                                      top.slowest_stage(), top.slowest_stage_self_time_ms())));
  }
  recommendation.set_summary_next_step(bottleneck.input_statement());
  pack(bottleneck, *recommendation.mutable_bottleneck_analysis());
}

void diagnose(const PodSteps& pod, InputPipelineAnalysisResult& out) {
  auto& diagnostics = *out.mutable_diagnostics();
  for (const auto& [reason, count] : pod.dropped_steps) {
    diagnostics.add_info(absl::StrCat("dropped ", count, " steps: ", reason));
  }
  if (pod.planes_without_steps > 0) {
    diagnostics.add_info(
        absl::StrCat(pod.planes_without_steps, " of ", pod.device_planes, " device planes have no steps"));
  }
  for (const auto& note : pod.notes) diagnostics.add_warnings(note);
  if (!pod.has_steps()) diagnostics.add_errors(no_steps_explanation());
}

std::string hardware_type(const PodSteps& pod) {
  std::set<std::string> kinds;
  for (const PodCore& core : pod.cores) {
    switch (core.core->kind()) {
      case podscope::v1::CORE_KIND_GPU: kinds.insert("GPU"); break;
      case podscope::v1::CORE_KIND_TPU: kinds.insert("TPU"); break;
      case podscope::v1::CORE_KIND_CUSTOM: kinds.insert("CUSTOM"); break;
      case podscope::v1::CORE_KIND_HOST: kinds.insert("CPU"); break;
      default: break;
    }
  }
  return absl::StrJoin(kinds, ",");
}

}  // namespace

std::string_view input_bound_verdict(double input_percent, double all_others_percent) {
  if (input_percent >= 20) return "HIGHLY";
  if (input_percent >= 5) return "MODERATELY";
  if (all_others_percent >= 3) return "POTENTIALLY";
  return "NOT";
}

std::string_view bottleneck_level(double percent) {
  if (percent >= 15) return "high";
  if (percent >= 3) return "moderate";
  return "no";
}

InputPipelineAnalysisResult pod_steps_to_input_pipeline(const PodSteps& pod) {
  InputPipelineAnalysisResult out;
  out.set_hardware_type(hardware_type(pod));
  fill_device_side(pod, out);
  fill_host_side(pod, out);
  rank_hosts(pod, out);
  recommend(pod, out);
  diagnose(pod, out);
  return out;
}

std::string render_input_pipeline_text(const InputPipelineAnalysisResult& r) {
  std::string text = "== Input pipeline analysis\n";
  for (const auto& detail : r.recommendation().details()) absl::StrAppend(&text, detail, "\n");
  if (r.step_details_size() > 0) {
    const auto& t = r.step_time_summary();
    const auto& p = r.input_percent_summary();
    absl::StrAppendFormat(&text, "step time: avg %.3f ms, stddev %.3f, min %.3f, max %.3f\n", t.average(),
                          t.standard_deviation(), t.minimum(), t.maximum());
    absl::StrAppendFormat(&text, "input %%:   avg %.1f, stddev %.1f, min %.1f, max %.1f\n", p.average(),
                          p.standard_deviation(), p.minimum(), p.maximum());
    if (static_cast<uint32_t>(r.step_details_size()) < r.step_count()) {
      absl::StrAppendFormat(&text, "\nshowing %d of the %u steps: the slowest, the rest evenly spaced\n",
                            r.step_details_size(), r.step_count());
    }
    absl::StrAppend(&text, "\n  step     time ms  input ms  wait range across cores ms  slowest core\n");
    for (const auto& any : r.step_details()) {
      PerGenericStepDetails d;
      if (!any.UnpackTo(&d)) continue;
      absl::StrAppendFormat(&text, "  %-6d %10.3f %9.3f  %10.3f .. %-10.3f (%u)  %s\n", d.step_number(),
                            d.step_time_ms(), d.host_wait_input_ms() + d.host_to_device_ms(),
                            d.min_core_wait_input_ms(), d.max_core_wait_input_ms(), d.core_count(), d.core_name());
    }
  }
  if (r.hosts_size() > 0) {
    absl::StrAppend(&text, "\nhosts by input share:\n");
    for (const auto& h : r.hosts()) {
      absl::StrAppendFormat(&text, "  %-24s %6.1f %%  %-11s %s\n", h.host_name(), h.input_percent(), h.verdict(),
                            h.slowest_stage());
    }
  }
  const auto& b = r.input_time_breakdown();
  if (r.input_op_details_size() > 0) {
    absl::StrAppendFormat(&text,
                          "\nhost side (self time, ms): enqueue %.3f, demanded file read %.3f, advanced file read "
                          "%.3f, preprocessing %.3f, unclassified %.3f\n",
                          b.enqueue_us() / 1e3, b.demanded_file_read_us() / 1e3, b.advanced_file_read_us() / 1e3,
                          b.preprocessing_us() / 1e3, b.unclassified_non_enqueue_us() / 1e3);
    absl::StrAppend(&text, "  input op                                  count   time ms  self ms  self %  category\n");
    int shown = 0;
    for (const auto& op : r.input_op_details()) {
      if (++shown > 15) break;
      absl::StrAppendFormat(&text, "  %-40.40s %6u %9.3f %8.3f %6.1f  %s\n", op.op_name(), op.count(), op.time_in_ms(),
                            op.self_time_in_ms(), op.self_time_in_percent(), op.category());
    }
  }
  for (const auto& e : r.diagnostics().errors()) absl::StrAppend(&text, "error: ", e, "\n");
  for (const auto& w : r.diagnostics().warnings()) absl::StrAppend(&text, "warning: ", w, "\n");
  for (const auto& i : r.diagnostics().info()) absl::StrAppend(&text, "note: ", i, "\n");
  return text;
}

}  // namespace podscope::analysis
