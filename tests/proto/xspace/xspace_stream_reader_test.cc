// The streaming XSpace reader: the same planes as a whole-message parse, lines left out by the filter
// without losing the plane's other fields, the header fields, and errors that name the file.
#include "proto/xspace/xspace_stream_reader.h"

#include <gtest/gtest.h>

#include <fstream>

#include "google/protobuf/util/message_differencer.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "tests/scratch_directory.h"

namespace podscope::xspace {
namespace {

namespace fs = std::filesystem;
using google::protobuf::util::MessageDifferencer;

class StreamReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    XPlaneBuilder host(find_or_add_plane(space_, kHostPlaneName, 0));
    host.stats().add(kHostNameStat, std::string_view("h0")).add(kClockOffsetStat, int64_t{-42});
    host.line_named("python3").add_event("train", 1'000, 500);
    XPlaneBuilder gpu(find_or_add_plane(space_, "/device:GPU:3", 7));
    gpu.line_named("Stream #1(Compute)").add_event("kernel", 2'000, 100).add(kFlopsStat, int64_t{9});
    gpu.line_named("TensorFlow Ops").add_event("op", 2'000, 100);
    gpu.line_named(kStepsLineName).add_event("0", 1'900, 300);
    space_.add_hostnames(std::string("h0"));
    space_.add_warnings(std::string("w"));
    std::ofstream out(path_, std::ios::binary);
    ASSERT_TRUE(space_.SerializeToOstream(&out));
  }

  std::vector<tensorflow::profiler::XPlane> read_all(const XLineFilter& filter, XSpaceHeader* header = nullptr) {
    std::vector<tensorflow::profiler::XPlane> planes;
    const absl::Status status = read_xspace_planes(
        path_,
        [&](const tensorflow::profiler::XPlane& p) {
          planes.push_back(p);
          return absl::OkStatus();
        },
        header, filter);
    EXPECT_TRUE(status.ok()) << status;
    return planes;
  }

  const testing::ScratchDirectory scratch_{"xspace_stream"};
  const fs::path path_ = scratch_.path() / "space.xplane.pb";
  tensorflow::profiler::XSpace space_;
};

TEST_F(StreamReaderTest, WithoutFilterPlanesEqualAWholeParse) {
  XSpaceHeader header;
  const auto planes = read_all(nullptr, &header);
  ASSERT_EQ(planes.size(), 2u);
  EXPECT_TRUE(MessageDifferencer::Equals(planes[0], space_.planes(0)));
  EXPECT_TRUE(MessageDifferencer::Equals(planes[1], space_.planes(1)));
  EXPECT_EQ(header.hostnames, std::vector<std::string>{"h0"});
  EXPECT_EQ(header.warnings, std::vector<std::string>{"w"});
}

TEST_F(StreamReaderTest, AFilterThatKeepsEverythingChangesNothing) {
  const auto planes = read_all([](std::string_view, std::string_view) { return true; });
  ASSERT_EQ(planes.size(), 2u);
  EXPECT_TRUE(MessageDifferencer::Equals(planes[0], space_.planes(0)));
  EXPECT_TRUE(MessageDifferencer::Equals(planes[1], space_.planes(1)));
}

TEST_F(StreamReaderTest, RejectedLinesAreLeftOutAndTheRestKept) {
  const auto planes = read_all([](std::string_view plane, std::string_view line) {
    return plane != kHostPlaneName && line != "TensorFlow Ops";
  });
  ASSERT_EQ(planes.size(), 2u);
  EXPECT_EQ(planes[0].lines_size(), 0);
  EXPECT_EQ(planes[0].stats_size(), 2);  // plane stats and metadata survive
  EXPECT_EQ(planes[0].stat_metadata_size(), space_.planes(0).stat_metadata_size());
  ASSERT_EQ(planes[1].lines_size(), 2);
  EXPECT_EQ(planes[1].id(), 7);
  EXPECT_EQ(planes[1].name(), "/device:GPU:3");
  EXPECT_TRUE(MessageDifferencer::Equals(planes[1].lines(0), space_.planes(1).lines(0)));
  EXPECT_TRUE(MessageDifferencer::Equals(planes[1].lines(1), space_.planes(1).lines(2)));
  EXPECT_EQ(planes[1].event_metadata_size(), space_.planes(1).event_metadata_size());
}

// Cut anywhere, even after the first whole plane, a file gives no plane at all: a reader never sums part of it.
TEST_F(StreamReaderTest, TruncatedFileIsDataLossNamingTheFileAndGivesNoPlane) {
  const auto size = fs::file_size(path_);
  for (const uintmax_t cut : {uintmax_t{5}, size / 2, size - space_.planes(0).ByteSizeLong() - 1}) {
    SCOPED_TRACE("cut " + std::to_string(cut) + " of " + std::to_string(size) + " bytes");
    std::ofstream(path_, std::ios::binary) << space_.SerializeAsString();
    fs::resize_file(path_, size - cut);
    int planes = 0;
    const absl::Status status = read_xspace_planes(path_, [&](const tensorflow::profiler::XPlane&) {
      ++planes;
      return absl::OkStatus();
    });
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(std::string(status.message()).find(path_.string()), std::string::npos) << status;
    EXPECT_EQ(planes, 0);
  }
}

// Whole planes, then a plane whose length varint says 2^40 bytes: read as 32 bits it would be 0, an empty plane
// that parses. It is refused, and the whole planes before it are not read either.
TEST_F(StreamReaderTest, APlaneLengthOf2To40IsDataLossAndNoPlaneIsRead) {
  std::string bytes = space_.SerializeAsString();
  bytes += std::string{'\x0a', '\x80', '\x80', '\x80', '\x80', '\x80', '\x20'};  // field 1, varint 2^40
  std::ofstream(path_, std::ios::binary) << bytes;
  int planes = 0;
  const absl::Status status = read_xspace_planes(path_, [&](const tensorflow::profiler::XPlane&) {
    ++planes;
    return absl::OkStatus();
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(std::string(status.message()).find("declared length 1099511627776"), std::string::npos) << status;
  EXPECT_EQ(planes, 0);
}

// A line whose declared length runs past its plane, and a zero byte where a tag should be: both refused.
TEST_F(StreamReaderTest, LengthsThatLieInsideAPlaneAndZeroTagsAreDataLoss) {
  tensorflow::profiler::XPlane plane;
  plane.set_name("/host:CPU");
  std::string plane_bytes = plane.SerializeAsString();
  plane_bytes += std::string{'\x1a', '\x7f', '\x12', '\x01', 'x'};  // lines: 127 bytes declared, 3 there
  std::string lying_line = std::string{'\x0a', static_cast<char>(plane_bytes.size())} + plane_bytes;
  std::string zero_tag = space_.SerializeAsString() + std::string{'\0', '\x22', '\x01', 'h'};
  for (const std::string& bytes : {lying_line, zero_tag}) {
    std::ofstream(path_, std::ios::binary) << bytes;
    const absl::Status status =
        read_xspace_planes(path_, [](const tensorflow::profiler::XPlane&) { return absl::OkStatus(); });
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  }
}

TEST_F(StreamReaderTest, CallbackErrorStopsTheRead) {
  int calls = 0;
  const absl::Status status = read_xspace_planes(path_, [&](const tensorflow::profiler::XPlane&) {
    ++calls;
    return absl::CancelledError("enough");
  });
  EXPECT_EQ(status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

TEST(StreamReader, MissingFileIsNotFound) {
  const absl::Status status = read_xspace_planes("/nonexistent/x.xplane.pb",
                                                 [](const tensorflow::profiler::XPlane&) { return absl::OkStatus(); });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
}

// A few bytes that declare a field of nearly 2 GiB: refused from the declared length, before any allocation.
TEST(StreamReader, DeclaredLengthBeyondTheFileIsDataLossWithoutAllocatingIt) {
  const testing::ScratchDirectory scratch("xspace_stream_hostile");
  const fs::path path = scratch.path() / "hostile.xplane.pb";
  for (const uint8_t field_tag :
       {uint8_t{0x0a} /* planes */, uint8_t{0x12} /* errors */, uint8_t{0x22} /* hostnames */}) {
    {
      // tag, varint 2,000,000,000 (0xEE6B2800), then 8 bytes of payload: 15 bytes in all.
      const unsigned char bytes[] = {field_tag, 0x80, 0xD0, 0xAC, 0xF3, 0x07, 'p', 'o',
                                     'd',       's',  'c',  'o',  'p',  'e',  '!'};
      std::ofstream out(path, std::ios::binary);
      out.write(reinterpret_cast<const char*>(bytes), sizeof(bytes));
    }
    ASSERT_EQ(fs::file_size(path), 15u);
    int planes = 0;
    const absl::Status status = read_xspace_planes(path, [&](const tensorflow::profiler::XPlane&) {
      ++planes;
      return absl::OkStatus();
    });
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_NE(std::string(status.message()).find("runs past the 9 bytes that hold it"), std::string::npos) << status;
    EXPECT_EQ(planes, 0);
  }
}

}  // namespace
}  // namespace podscope::xspace
