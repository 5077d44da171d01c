// Reading trace files: plain and gzip, and the attacks a file can make (a gzip bomb, truncation, garbage).
#include "kineto/trace_file.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/scratch_directory.h"

namespace podscope::kineto {
namespace {

namespace fs = std::filesystem;

class TraceFileTest : public ::testing::Test {
 protected:
  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(scratch_.path() / name, std::ios::binary) << bytes;
    return scratch_.path() / name;
  }
  static std::string gzip(const std::string& text) {
    z_stream z{};
    deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, text.size()) + 32, '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z.avail_in = static_cast<uInt>(text.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
  }

  const testing::ScratchDirectory scratch_{"kineto_file"};
};

constexpr const char* kTrace =
    R"({"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
        "ts": 10, "dur": 5}]})";

TEST_F(TraceFileTest, PlainAndGzipTracesConvertAlike) {
  auto plain = read_kineto_trace_file(write("a.pt.trace.json", kTrace));
  auto gz = read_kineto_trace_file(write("b.pt.trace.json.gz", gzip(kTrace)));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(gz.ok()) << gz.status();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(*plain, *gz));
}

TEST_F(TraceFileTest, AGzipBombStopsAtTheBound) {
  const std::string bomb = gzip(std::string(8 << 20, ' '));  // 8 MiB of spaces in a few KiB
  auto space = read_kineto_trace_file(write("bomb.pt.trace.json.gz", bomb), 1 << 20);
  ASSERT_FALSE(space.ok());
  EXPECT_EQ(space.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(space.status().message().find("1048576-byte bound"), std::string::npos) << space.status();
}

TEST_F(TraceFileTest, AFileOverTheBoundIsRefusedUnread) {
  auto space = read_kineto_trace_file(write("big.pt.trace.json", std::string(4096, ' ')), 1024);
  ASSERT_FALSE(space.ok());
  EXPECT_EQ(space.status().code(), absl::StatusCode::kResourceExhausted);
}

TEST_F(TraceFileTest, TruncatedOrBrokenInputNamesTheFile) {
  const std::string gz = gzip(kTrace);
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"cut.pt.trace.json.gz", gz.substr(0, gz.size() / 2)},
           {"garbage.pt.trace.json.gz", std::string("\x1f\x8b") + std::string(100, 'x')},
           {"text.pt.trace.json", "this is not JSON"},
           {"empty.pt.trace.json", ""}}) {
    auto space = read_kineto_trace_file(write(name, bytes));
    ASSERT_FALSE(space.ok()) << name;
    EXPECT_NE(space.status().message().find(name), std::string::npos) << space.status();
  }
}

TEST_F(TraceFileTest, AMissingFileIsAnError) {
  EXPECT_FALSE(read_kineto_trace_file(scratch_.path() / "absent.pt.trace.json").ok());
}

}  // namespace
}  // namespace podscope::kineto
