// The framework test environments that scripts/python_envs.sh makes in <build>/venv/<env>: a test that starts a real
// TensorFlow, JAX or PyTorch process asks here for its environment's python. Absent, the test skips, or fails when
// PODSCOPE_REQUIRE_FRAMEWORKS is set (CI sets it), so CI never passes a framework test that did not run.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace podscope::testing {

// The python of environment `env` ("tf", "torch") when it exists. Otherwise std::nullopt, after recording on the
// running test a skip, or a fatal failure under PODSCOPE_REQUIRE_FRAMEWORKS. A test body returns on std::nullopt.
inline std::optional<std::filesystem::path> framework_python(std::string_view env) {
  std::filesystem::path python =
      std::filesystem::path(PODSCOPE_BINARY_DIR) / "venv" / std::string(env) / "bin" / "python";
  if (std::filesystem::exists(python)) return python;
  [&python] {
    if (std::getenv("PODSCOPE_REQUIRE_FRAMEWORKS") != nullptr) {
      FAIL() << "framework environment " << python << " is missing and PODSCOPE_REQUIRE_FRAMEWORKS is set";
    }
    GTEST_SKIP()
        << "framework environment " << python
        << " is missing (bash scripts/python_envs.sh <build> makes it; set PODSCOPE_REQUIRE_FRAMEWORKS to fail)";
  }();
  return std::nullopt;
}

}  // namespace podscope::testing
