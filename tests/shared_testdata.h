// Files from ../shared/testdata: real outputs of other profilers, kept beside the project rather than in it.
// A test that needs one skips when it is absent, so a checkout without it still runs the rest of the suite;
// with PODSCOPE_REQUIRE_TESTDATA set (CI sets it) the absence fails the test instead, so CI never passes a test
// that did not run.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

namespace podscope::testing {

// The path of `name` in the shared test data when the file exists. Otherwise std::nullopt, after recording
// on the running test a skip, or a fatal failure when PODSCOPE_REQUIRE_TESTDATA is set. A test body returns
// on std::nullopt; in a fixture's SetUp() either outcome keeps the test body from running.
inline std::optional<std::filesystem::path> shared_testdata_file(std::string_view name) {
  std::filesystem::path path = std::filesystem::path(PODSCOPE_SHARED_TESTDATA) / name;
  if (std::filesystem::exists(path)) return path;
  [&path] {
    if (std::getenv("PODSCOPE_REQUIRE_TESTDATA") != nullptr) {
      FAIL() << "shared test data file " << path << " is missing and PODSCOPE_REQUIRE_TESTDATA is set";
    }
    GTEST_SKIP() << "shared test data file " << path << " is missing (set PODSCOPE_REQUIRE_TESTDATA to fail instead)";
  }();
  return std::nullopt;
}

}  // namespace podscope::testing
