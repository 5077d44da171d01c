// A fresh, empty directory of a test's own under the system's temp dir (`podscope-<name>-XXXXXX`, made by mkdtemp,
// so parallel test processes and reruns never share one), removed with everything in it when the test is done.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace podscope::testing {

class ScratchDirectory {
 public:
  explicit ScratchDirectory(std::string_view name = "test") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("podscope-" + std::string(name) + "-XXXXXX"));
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp " + pattern + " failed");
    path_ = pattern;
  }
  ~ScratchDirectory() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(std::string_view name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace podscope::testing
