// Test helper for report_html_test.py: writes a synthetic 4-rank run (rank 2 straggling) into the
// directory given as argv[1], or copies the XSpace file given as argv[2] there, and analyses it there, leaving
// report.html next to the inputs.
#include <fstream>
#include <iostream>

#include "analysis/runner/analysis_runner.h"
#include "tests/analysis/synthetic_pod.h"

namespace {

bool write_straggler_pod(const std::filesystem::path& dir) {
  podscope::analysis::testing::SyntheticPodSpec spec;
  spec.steps = 8;
  spec.straggler_rank = 2;
  spec.straggler_delay_ns = 20'000'000;
  if (podscope::analysis::testing::write_synthetic_pod(dir, spec)) return true;
  std::cerr << "cannot write the pod into " << dir << "\n";
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::cerr << "usage: " << argv[0] << " RUN_DIR [XSPACE_FILE]\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  if (argc == 3) {
    std::filesystem::copy_file(argv[2], dir / std::filesystem::path(argv[2]).filename());
  } else if (!write_straggler_pod(dir)) {
    return 1;
  }
  auto outcome = podscope::analysis::analyze_run_directory(dir);
  if (!outcome.ok()) {
    std::cerr << outcome.status() << "\n";
    return 1;
  }
  std::cout << outcome->summary_text;
  return 0;
}
