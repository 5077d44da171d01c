// The streaming XSpace reader on arbitrary files, with and without a line filter: a status for every input, no
// crash, no allocation beyond what the file can hold, and all or nothing (a refused file gives no plane; a file
// read is one protobuf parses whole, with as many planes). Seeds: tests/data/analysis, ../shared/testdata.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "proto/xspace/xspace_stream_reader.h"

namespace {

[[noreturn]] void fail(const char* what, const absl::Status& status) {
  std::fprintf(stderr, "xspace reader property broken: %s (%s)\n", what, std::string(status.message()).c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: an in-memory file keeps each execution off the disk.
  static const int fd = memfd_create("xspace", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  // protobuf logs every invalid UTF-8 string its whole parse meets: noise for a fuzzer.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  podscope::xspace::XSpaceHeader header;
  int planes = 0;
  auto count_plane = [&planes](const tensorflow::profiler::XPlane& plane) {
    ++planes;
    return plane.lines_size() >= 0 ? absl::OkStatus() : absl::InternalError("unreachable");
  };
  // All or nothing: a file the reader refuses gives no plane, and one it reads is one protobuf parses whole, plane
  // for plane.
  const absl::Status read = podscope::xspace::read_xspace_planes(path, count_plane, &header);
  tensorflow::profiler::XSpace whole;
  const bool parses = whole.ParseFromArray(data, static_cast<int>(size));
  if (!read.ok() && planes != 0) fail("a refused file gave planes", read);
  if (read.ok() && !parses) fail("the reader read a file protobuf refuses", read);
  if (read.ok() && planes != whole.planes_size()) fail("the reader gave another number of planes", read);
  planes = 0;
  (void)podscope::xspace::read_xspace_planes(path, count_plane, nullptr,
                                             [](std::string_view, std::string_view line) { return line != "skip"; });
  return 0;
}
