// Reading back a gzip file that a trace writer wrote (pod.trace.json.gz), whole.
#pragma once

#include <zlib.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace podscope::testing {

inline std::string gunzip_file(const std::filesystem::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  EXPECT_NE(file, nullptr) << path;
  std::string out;
  char buf[65536];
  int n;
  while ((n = gzread(file, buf, sizeof buf)) > 0) out.append(buf, n);
  gzclose(file);
  return out;
}

}  // namespace podscope::testing
