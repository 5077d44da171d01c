#include "analysis/tools/overview_page.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "analysis/tools/input_pipeline.h"
#include "analysis/steps/step_database.h"
#include "analysis/steps/step_spans.h"
#include "proto/xspace/names.h"

namespace podscope::analysis {
namespace {

using tensorflow::profiler::BottleneckAnalysis;
using tensorflow::profiler::GenericRecommendation;
using tensorflow::profiler::OverviewPage;
using tensorflow::profiler::PerGenericStepDetails;
using tensorflow::profiler::RankedAdvice;

constexpr size_t kTopDeviceOps = 10;

double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

void describe_environment(const PodSteps& pod, OverviewPage& page) {
  auto& env = *page.mutable_run_environment();
  std::set<std::string> hosts;
  for (const auto& host : pod.hosts) hosts.insert(host.host_name());
  int32_t cores = 0;
  int64_t batch_size = 0;
  for (const PodCore& core : pod.cores) {
    hosts.insert(core.host_name);
    if (core.core->event_count() > 0 || core.core->kind() == podscope::v1::CORE_KIND_HOST) ++cores;
    batch_size = std::max(batch_size, core.core->batch_size());
  }
  env.set_batch_size_per_core(batch_size);
  env.set_host_count(static_cast<int32_t>(hosts.size()));
  env.set_task_count(static_cast<int32_t>(pod.hosts.size()));
  for (const auto& host : hosts) {
    (*env.mutable_hostnames())[host] = true;
    env.add_host_dependent_job_info()->set_host_id(host);
  }
  env.set_device_type(page.input_analysis().hardware_type());
  env.set_device_core_count(cores);
  env.set_replica_count(cores);
  env.set_num_cores_per_replica(1);
}

// Idle shares, 16/32-bit compute, FLOP rate and memory bandwidth against the device's peak.
void summarize_performance(const PodSteps& pod, OverviewPage& page) {
  auto& analysis = *page.mutable_analysis();
  double step_ns = 0, device_busy_ns = 0, host_busy_ns = 0, compute16 = 0, compute32 = 0;
  double flops = 0, bytes = 0, peak_flops_time = 0, peak_bytes_time = 0;
  for (const PodCore& core : pod.cores) {
    double core_busy = 0;
    for (const podscope::v1::CoreStep* step : core.steps) {
      const int64_t duration = step->end_ns() - step->start_ns();
      step_ns += static_cast<double>(duration);
      device_busy_ns += static_cast<double>(step->device_busy_ns());
      host_busy_ns += static_cast<double>(std::min(step->host_busy_ns(), duration));
      compute16 += static_cast<double>(step->type_ns(static_cast<int>(EventType::kDeviceCompute16)));
      compute32 += static_cast<double>(step->type_ns(static_cast<int>(EventType::kDeviceCompute32)));
    }
    for (const podscope::v1::CoreOp& op : core.core->ops()) {
      flops += op.flops();
      bytes += op.bytes_accessed();
      core_busy += static_cast<double>(op.self_ns());
    }
    // Peak work the core could have done in the time its ops ran.
    const DeviceCapability capability = device_capability(core.core->capability());
    peak_flops_time += capability.peak_flops_per_s() * core_busy / 1e9;
    peak_bytes_time += capability.memory_bandwidth_bytes_per_s * core_busy / 1e9;
  }
  analysis.set_device_idle_time_percent(step_ns > 0 ? 100.0 - percent(device_busy_ns, step_ns) : 0.0);
  analysis.set_host_idle_time_percent(step_ns > 0 ? 100.0 - percent(host_busy_ns, step_ns) : 0.0);
  analysis.set_device_duty_cycle_percent(percent(device_busy_ns, step_ns));
  analysis.set_device_compute_16bit_percent(percent(compute16, compute16 + compute32));
  analysis.set_device_compute_32bit_percent(
      compute16 + compute32 > 0 ? 100.0 - percent(compute16, compute16 + compute32) : 0.0);
  if (flops > 0 && peak_flops_time > 0) {
    analysis.set_flop_rate_utilization_relative_to_roofline_percent(percent(flops, peak_flops_time));
  }
  if (bytes > 0 && peak_bytes_time > 0) {
    analysis.set_memory_bw_utilization_relative_to_hw_limit_percent(percent(bytes, peak_bytes_time));
  }
  if (!pod.has_steps()) {
    analysis.set_remark_text(absl::StrCat("Step time: unknown, because ", no_steps_explanation(), "."));
    analysis.set_remark_color("red");
  }
}

void rank_top_device_ops(const PodSteps& pod, OverviewPage& page) {
  struct Total {
    OpKind kind = OpKind::kLowFlopsCompute;
    double self_ns = 0;
    double flops = 0;
  };
  std::map<std::string, Total> totals;
  double all_ns = 0;
  for (const PodCore& core : pod.cores) {
    for (const podscope::v1::CoreOp& op : core.core->ops()) {
      Total& t = totals[op.name()];
      t.kind = static_cast<OpKind>(op.kind());
      t.self_ns += static_cast<double>(op.self_ns());
      t.flops += op.flops();
      all_ns += static_cast<double>(op.self_ns());
    }
  }
  std::vector<std::pair<std::string, Total>> ranked(totals.begin(), totals.end());
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.second.self_ns > b.second.self_ns; });
  if (ranked.size() > kTopDeviceOps) ranked.resize(kTopDeviceOps);
  double cumulative = 0;
  for (const auto& [name, t] : ranked) {
    auto* op = page.mutable_analysis()->add_top_device_ops();
    op->set_name(name);
    op->set_category(std::string(op_kind_name(t.kind)));
    const double fraction = all_ns > 0 ? t.self_ns / all_ns : 0.0;
    cumulative += fraction;
    op->set_self_time_fraction(fraction);
    op->set_cumulative_time_fraction(cumulative);
    op->set_flop_rate(t.self_ns > 0 ? t.flops / t.self_ns : 0.0);  // FLOP per ns = GFLOP/s
  }
}

// Shares of the step time (the pod's combined steps, every step) for kernel launch, collectives and all others: the
// ratios of their averages over the steps to the average step time, and those averages.
struct StepShares {
  double kernel_launch = 0;
  double collectives = 0;
  double all_others = 0;
  double step_ms = 0;
  bool any = false;
};

StepShares step_shares(const tensorflow::profiler::InputPipelineAnalysisResult& input) {
  tensorflow::profiler::GenericStepTimeBreakdown breakdown;
  if (input.step_details().empty() || !input.step_time_breakdown().UnpackTo(&breakdown)) return {};
  const double total = input.step_time_summary().average();
  const double launch = breakdown.host_prepare_ms_summary().average();
  const double collectives = breakdown.device_collectives_ms_summary().average();
  const double others = breakdown.unknown_time_ms_summary().average();
  return {.kernel_launch = percent(launch, total),
          .collectives = percent(collectives, total),
          .all_others = percent(others, total),
          .step_ms = total,
          .any = total > 0};
}

// Whether the run had an accelerator (a GPU or TPU plane): kernel launches, CUDA graphs and 16-bit compute mean
// nothing without one.
bool has_accelerator(const OverviewPage& page) {
  const std::string& type = page.run_environment().device_type();
  return type.find("GPU") != std::string::npos || type.find("TPU") != std::string::npos;
}

constexpr char kLaunchAction[] =
    "fuse small ops (XLA, tf.function(jit_compile=True), torch.compile) or capture the step in a CUDA graph; the "
    "trace shows the gaps between kernels and `--tool trace_analysis` the launch delays";
constexpr char kCollectivesAction[] =
    "overlap them with compute or shrink what is exchanged; open `podscope analyze RUN --tool pod` for sync time and "
    "stragglers";
constexpr char kUnexplainedAction[] =
    "annotate more of the host's work (podscope's annotations, torch.profiler.record_function) and look at the trace";

// XProf's fields: the input verdict as the bottleneck and statement, the generic recommendation's levels of what the
// combined step shows (kernel launch and precision only where there is an accelerator).
void recommend(OverviewPage& page) {
  const auto& input = page.input_analysis();
  BottleneckAnalysis input_bottleneck;
  input.recommendation().bottleneck_analysis().UnpackTo(&input_bottleneck);
  auto& recommendation = *page.mutable_recommendation();
  const std::string& verdict = input_bottleneck.input_classification();
  recommendation.set_bottleneck(verdict == "unknown"                             ? "unknown"
                                : verdict == "HIGHLY" || verdict == "MODERATELY" ? "host"
                                                                                 : "device");
  std::string statement = input_bottleneck.input_statement();
  // In a synchronous pod every core waits for the one waiting for its input, while the pod's combined step shows what
  // the busiest core did (its compute): an input-bound host is named even when the pod as a whole is not.
  const bool host_input_bound =
      input.hosts_size() > 0 && (input.hosts(0).verdict() == "HIGHLY" || input.hosts(0).verdict() == "MODERATELY");
  if (recommendation.bottleneck() == "host" || host_input_bound) {
    // Pod-wide, where to look first: the most input-bound host and its slowest stage.
    for (int i = 1; i < input.recommendation().details_size(); ++i) {
      absl::StrAppend(&statement, " ", input.recommendation().details(i), ".");
    }
  }
  recommendation.set_statement(statement);
  const StepShares shares = step_shares(input);
  const bool accelerator = has_accelerator(page);
  GenericRecommendation generic;
  if (shares.any) {
    if (accelerator) {
      generic.set_kernel_launch_bottleneck(std::string(bottleneck_level(shares.kernel_launch)));
      generic.set_kernel_launch_statement(
          absl::StrFormat("%.1f %% of the step time launches kernels%s", shares.kernel_launch,
                          shares.kernel_launch >= 3 ? absl::StrCat(": ", kLaunchAction) : "."));
    }
    generic.set_device_collectives_bottleneck(std::string(bottleneck_level(shares.collectives)));
    generic.set_device_collectives_statement(
        absl::StrFormat("%.1f %% of the step time is in collectives%s", shares.collectives,
                        shares.collectives >= 3 ? absl::StrCat(": ", kCollectivesAction) : "."));
    generic.set_all_other_bottleneck(std::string(bottleneck_level(shares.all_others)));
    generic.set_all_other_statement(
        absl::StrFormat("%.1f %% of the step time is unexplained (no event recorded covers it)%s", shares.all_others,
                        shares.all_others >= 3 ? absl::StrCat(": ", kUnexplainedAction) : "."));
    const auto& a = page.analysis();
    if (accelerator && a.device_compute_16bit_percent() + a.device_compute_32bit_percent() > 0 &&
        a.device_compute_16bit_percent() < 10) {
      generic.set_precision_statement(
          absl::StrFormat("Only %.1f %% of the device compute is 16-bit: mixed precision (tf.keras.mixed_precision, "
                          "torch.autocast) may speed it up.",
                          a.device_compute_16bit_percent()));
    }
  }
  recommendation.mutable_recommendation()->set_type_url(
      absl::StrCat("type.googleapis.com/", generic.GetDescriptor()->full_name()));
  recommendation.mutable_recommendation()->set_value(generic.SerializeAsString());
}

}  // namespace

RankedAdvice make_advice(std::string_view kind, double step_percent, double ms_per_step, std::string statement,
                         std::string_view action) {
  RankedAdvice advice;
  advice.set_kind(std::string(kind));
  advice.set_level(std::string(bottleneck_level(step_percent)));
  advice.set_statement(std::move(statement));
  advice.set_action(std::string(action));
  advice.set_step_percent(step_percent);
  advice.set_ms_per_step(ms_per_step);
  return advice;
}

std::vector<RankedAdvice> overview_advice(const OverviewPage& page) {
  std::vector<RankedAdvice> advice;
  const auto& input = page.input_analysis();
  const StepShares shares = step_shares(input);
  if (!shares.any) return advice;
  auto ms_of = [&](double step_percent) { return shares.step_ms * step_percent / 100; };
  BottleneckAnalysis verdict;
  input.recommendation().bottleneck_analysis().UnpackTo(&verdict);
  const std::string& level = verdict.input_classification();
  if (level == "HIGHLY" || level == "MODERATELY" ||
      (input.hosts_size() > 0 && (input.hosts(0).verdict() == "HIGHLY" || input.hosts(0).verdict() == "MODERATELY"))) {
    // The pod's share of the step, however input-bound its most input-bound host is: what the whole pod loses.
    const double share = input.input_percent();
    std::string statement = absl::StrFormat(
        "Your program is %s input-bound: %.1f %% of the step time (%.3f ms per step) waits for input.",
        level == "HIGHLY" || level == "MODERATELY" ? level : input.hosts(0).verdict(), share, ms_of(share));
    for (int i = 1; i < input.recommendation().details_size(); ++i)
      absl::StrAppend(&statement, " ", input.recommendation().details(i), ".");
    const bool data_loader =
        input.hosts_size() > 0 && input.hosts(0).slowest_stage().starts_with(xspace::kTorchDataLoaderPrefix);
    if (share >= 3) {
      advice.push_back(make_advice(
          "input", share, ms_of(share), std::move(statement),
          data_loader ? "PyTorch's DataLoader loads each batch while the step waits: load them in worker processes "
                        "(num_workers) and ahead of the step; `podscope analyze RUN --tool input_pipeline` shows "
                        "each step's wait"
                      : "see the host-side breakdown of `podscope analyze RUN --tool input_pipeline` and, for "
                        "tf.data, `--tool tf_data`"));
    }
  }
  if (has_accelerator(page) && shares.kernel_launch >= 3) {
    advice.push_back(make_advice(
        "kernel launch", shares.kernel_launch, ms_of(shares.kernel_launch),
        absl::StrFormat("%.1f %% of the step time (%.3f ms per step) the device idles while the host launches kernels.",
                        shares.kernel_launch, ms_of(shares.kernel_launch)),
        kLaunchAction));
  }
  if (shares.all_others >= 3) {
    advice.push_back(
        make_advice("unexplained", shares.all_others, ms_of(shares.all_others),
                    absl::StrFormat("%.1f %% of the step time (%.3f ms per step) no recorded event explains.",
                                    shares.all_others, ms_of(shares.all_others)),
                    kUnexplainedAction));
  }
  const auto& a = page.analysis();
  if (has_accelerator(page) && a.device_compute_32bit_percent() > 0 && a.device_compute_16bit_percent() < 10) {
    tensorflow::profiler::GenericStepTimeBreakdown breakdown;
    input.step_time_breakdown().UnpackTo(&breakdown);
    const double compute_ms = breakdown.device_compute_ms_summary().average() * a.device_compute_32bit_percent() / 100;
    RankedAdvice precision = make_advice(
        "precision", percent(compute_ms, shares.step_ms), compute_ms,
        absl::StrFormat("%.1f %% of the device compute is 32-bit: %.3f ms per step (%.1f %% of the step time).",
                        a.device_compute_32bit_percent(), compute_ms, percent(compute_ms, shares.step_ms)),
        "mixed precision (tf.keras.mixed_precision, torch.autocast) may run it faster; what it gains depends on the "
        "model");
    precision.set_level("potential");
    if (compute_ms > 0) advice.push_back(std::move(precision));
  }
  return advice;
}

void show_ranked_advice(const std::vector<RankedAdvice>& ranked, OverviewPage& page) {
  auto& recommendation = *page.mutable_recommendation();
  recommendation.clear_ranked_advice();
  for (const RankedAdvice& advice : ranked) *recommendation.add_ranked_advice() = advice;
  if (ranked.empty() || ranked.front().level() == "potential") return;
  recommendation.set_bottleneck(ranked.front().kind());
  recommendation.set_statement(absl::StrCat(ranked.front().statement(), " Try: ", ranked.front().action(), "."));
}

OverviewPage pod_steps_to_overview_page(const PodSteps& pod,
                                        const tensorflow::profiler::InputPipelineAnalysisResult& input_pipeline) {
  OverviewPage page;
  *page.mutable_input_analysis() = input_pipeline;
  describe_environment(pod, page);
  summarize_performance(pod, page);
  rank_top_device_ops(pod, page);
  recommend(page);
  *page.mutable_diagnostics() = input_pipeline.diagnostics();
  return page;
}

std::string render_overview_recommendation_text(const OverviewPage& page) {
  const auto& recommendation = page.recommendation();
  const auto& ranked = recommendation.ranked_advice();
  std::string text;
  if (ranked.empty() || ranked[0].level() == "potential") {
    absl::StrAppend(&text, "recommendation: ", recommendation.statement(), "\n");
  } else {
    absl::StrAppend(&text, "recommendation, what costs the most first:\n");
  }
  for (int i = 0; i < ranked.size(); ++i) {
    const RankedAdvice& advice = ranked[i];
    absl::StrAppendFormat(&text, "  %d. %s%s: %s Try: %s.\n", i + 1, advice.level(),
                          advice.level() == "potential" ? "" : absl::StrFormat(", %.1f %%", advice.step_percent()),
                          advice.statement(), advice.action());
  }
  return text;
}

std::string render_overview_text(const OverviewPage& page) {
  const auto& input = page.input_analysis();
  const auto& a = page.analysis();
  const auto& env = page.run_environment();
  std::string text = "== Overview\n";
  if (input.step_details_size() > 0) {
    const auto& t = input.step_time_summary();
    absl::StrAppendFormat(&text, "average step time: %.3f ms (stddev %.3f, min %.3f, max %.3f) over %d steps\n",
                          t.average(), t.standard_deviation(), t.minimum(), t.maximum(), input.step_count());
  } else {
    absl::StrAppend(&text, a.remark_text().empty() ? "step time: unknown" : a.remark_text(), "\n");
  }
  if (env.device_type() == "CPU") {
    // A program without devices: its host is its core, and there is no device time to speak of.
    absl::StrAppendFormat(&text, "host idle %.1f %% (no accelerator: the host runs the steps)\n",
                          a.host_idle_time_percent());
  } else {
    absl::StrAppendFormat(&text,
                          "host idle %.1f %%, device idle %.1f %%; device compute %.1f %% 16-bit, %.1f %% 32-bit\n",
                          a.host_idle_time_percent(), a.device_idle_time_percent(), a.device_compute_16bit_percent(),
                          a.device_compute_32bit_percent());
  }
  if (a.flop_rate_utilization_relative_to_roofline_percent() > 0 ||
      a.memory_bw_utilization_relative_to_hw_limit_percent() > 0) {
    absl::StrAppendFormat(&text, "FLOP rate %.1f %% of peak, memory bandwidth %.1f %% of peak\n",
                          a.flop_rate_utilization_relative_to_roofline_percent(),
                          a.memory_bw_utilization_relative_to_hw_limit_percent());
  }
  absl::StrAppendFormat(&text, "run environment: %d hosts, %d %s cores", env.host_count(), env.device_core_count(),
                        env.device_type());
  if (env.batch_size_per_core() > 0)
    absl::StrAppendFormat(&text, ", batch size %d per core", env.batch_size_per_core());
  text += "\n";
  if (input.step_details_size() > 0) {
    absl::StrAppend(&text, "\nstep-time graph (ms, the pod's combined step):\n",
                    "  step       total  compute  input  collectives  d2d  launch  host  output  other\n");
    for (const auto& any : input.step_details()) {
      PerGenericStepDetails d;
      if (!any.UnpackTo(&d)) continue;
      absl::StrAppendFormat(&text, "  %-6d %10.3f %8.3f %6.3f %12.3f %4.3f %7.3f %5.3f %7.3f %6.3f\n", d.step_number(),
                            d.step_time_ms(), d.device_compute_ms(), d.host_wait_input_ms() + d.host_to_device_ms(),
                            d.device_collectives_ms(), d.device_to_device_ms(), d.host_prepare_ms(),
                            d.host_compute_ms() + d.host_compile_ms(), d.output_ms(), d.unknown_time_ms());
    }
  }
  if (a.top_device_ops_size() > 0) {
    absl::StrAppend(&text, "\ntop device ops by self time:\n  self %   cum %   GFLOP/s  category            op\n");
    for (const auto& op : a.top_device_ops()) {
      absl::StrAppendFormat(&text, "  %6.1f %7.1f %9.1f  %-18s  %.100s\n", 100 * op.self_time_fraction(),
                            100 * op.cumulative_time_fraction(), op.flop_rate(), op.category(), op.name());
    }
  }
  absl::StrAppend(&text, "\n", render_overview_recommendation_text(page));
  for (const auto& e : page.diagnostics().errors()) absl::StrAppend(&text, "error: ", e, "\n");
  for (const auto& w : page.diagnostics().warnings()) absl::StrAppend(&text, "warning: ", w, "\n");
  for (const auto& i : page.diagnostics().info()) absl::StrAppend(&text, "note: ", i, "\n");
  return text;
}

}  // namespace podscope::analysis
