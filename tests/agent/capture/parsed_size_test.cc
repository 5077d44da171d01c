// parsed_size_bound against protobuf's own count of what a parsed message holds (SpaceUsedLong), on TensorFlow's
// XSpace from ../shared/testdata and on an answer made to be cheap as bytes and dear as objects.
#include "agent/capture/parsed_size.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "tensorflow/profiler_service.pb.h"
#include "tests/shared_testdata.h"

namespace podscope::agent {
namespace {

using tensorflow::profiler::XSpace;

// A bound above what the parse holds, and not far above: it decides what fits a capture's memory.
void expect_bounds(const google::protobuf::Message& parsed, const std::string& bytes) {
  const absl::StatusOr<ParsedSize> bound = parsed_size_bound(bytes, *parsed.GetDescriptor());
  ASSERT_TRUE(bound.ok()) << bound.status();
  const size_t held = parsed.SpaceUsedLong();
  std::printf("%zu bytes: %zu held once parsed, bound %zu (%.2fx)\n", bytes.size(), held, bound->bytes,
              static_cast<double>(bound->bytes) / static_cast<double>(held));
  EXPECT_GE(bound->bytes, held);
  EXPECT_LE(bound->bytes, 3 * held);
  EXPECT_FALSE(bound->invalid_utf8);
}

TEST(ParsedSizeBound, TensorFlowsXSpaceIsBoundedAboveWhatItHoldsParsed) {
  const auto file = testing::shared_testdata_file("tf_bert_8gpu_host0.xplane.pb");
  if (!file) GTEST_SKIP() << "no shared test data";
  std::ifstream in(*file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  tensorflow::ProfileResponse response;
  ASSERT_TRUE(response.mutable_xspace()->ParseFromString(bytes.str()));
  expect_bounds(response, response.SerializeAsString());
}

TEST(ParsedSizeBound, ManyEmptyEventsCostTheirObjectsNotTheirBytes) {
  // Two bytes an event on the wire, tens of bytes each parsed: an answer that passes a bound on bytes alone.
  XSpace space;
  auto* line = space.add_planes()->add_lines();
  for (int i = 0; i < 200'000; ++i) line->add_events();
  const std::string bytes = space.SerializeAsString();
  XSpace parsed;
  ASSERT_TRUE(parsed.ParseFromString(bytes));
  expect_bounds(parsed, bytes);
  EXPECT_GT(parsed_size_bound(bytes, *XSpace::descriptor())->bytes, 20 * bytes.size());
}

TEST(ParsedSizeBound, InvalidUtf8IsFoundAndItsRepairCharged) {
  XSpace space;
  space.add_planes()->set_name("gpu \xFF");  // as TensorFlow's C++ server sends names it never validated
  const std::string bytes = space.SerializePartialAsString();
  const absl::StatusOr<ParsedSize> bound = parsed_size_bound(bytes, *XSpace::descriptor());
  ASSERT_TRUE(bound.ok());
  EXPECT_TRUE(bound->invalid_utf8);
  EXPECT_GE(bound->repair_bytes, bytes.size());
  EXPECT_GT(bound->peak_bytes(), bound->bytes);
}

TEST(ParsedSizeBound, BytesThatAreNoSuchMessageAreRefusedNamingWhere) {
  const std::string broken = std::string("\x0a\x7f", 2) + "short";  // a plane declared 127 bytes long, 5 there
  const absl::StatusOr<ParsedSize> bound = parsed_size_bound(broken, *XSpace::descriptor());
  ASSERT_FALSE(bound.ok());
  EXPECT_NE(bound.status().message().find("tensorflow.profiler.XSpace of 7 bytes breaks off at byte"),
            std::string::npos)
      << bound.status();
}

}  // namespace
}  // namespace podscope::agent
