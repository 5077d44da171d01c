// podscope: the CLI. Parses arguments and dispatches; the work lives in the capture library.
#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/analyze_command.h"
#include "cli/capture_command.h"
#include "cli/forget_command.h"
#include "cli/status_command.h"
#include "daemon/heap.h"

int main(int argc, char** argv) {
  podscope::keep_freed_heap_for_reuse();  // a short-lived process: its analysis reuses what it frees
  CLI::App app{"podscope: synchronized profiling of ML training pods"};
  app.set_version_flag("--version", PODSCOPE_VERSION);
  app.require_subcommand(1);
  podscope::cli::CaptureFlags capture_flags;
  auto* capture = app.add_subcommand("capture", "Capture every host of a pod at one instant (or monitor it)");
  podscope::cli::add_capture_flags(*capture, capture_flags);
  podscope::cli::StatusFlags status_flags;
  auto* status = app.add_subcommand("status", "Agents, their collectors, clock offset and RTT");
  podscope::cli::add_status_flags(*status, status_flags);
  podscope::cli::AnalyzeFlags analyze_flags;
  auto* analyze = app.add_subcommand("analyze", "Analyse a captured run directory");
  podscope::cli::add_analyze_flags(*analyze, analyze_flags);
  podscope::cli::ForgetFlags forget_flags;
  auto* forget =
      app.add_subcommand("forget", "Free a worker name on a coordinator (it belongs to its first registrant)");
  podscope::cli::add_forget_flags(*forget, forget_flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;  // usage errors exit 2, whatever CLI11's own code for the error
  }
  if (*capture) return podscope::cli::run_capture_command(capture_flags);
  if (*status) return podscope::cli::run_status_command(status_flags);
  if (*forget) return podscope::cli::run_forget_command(forget_flags);
  return podscope::cli::run_analyze_command(analyze_flags);
}
