// The streaming XSpace reader on arbitrary files, with and without a line filter: a status for every input, no
// crash, and no allocation beyond what the file can hold. Seeds: tests/data/analysis, ../shared/testdata.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "proto/xspace/xspace_stream_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The reader takes a path: an in-memory file keeps each execution off the disk.
  static const int fd = memfd_create("xspace", 0);
  if (fd < 0 || ftruncate(fd, 0) != 0 || pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)) return 0;
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  podscope::xspace::XSpaceHeader header;
  auto count_plane = [](const tensorflow::profiler::XPlane& plane) {
    return plane.lines_size() >= 0 ? absl::OkStatus() : absl::InternalError("unreachable");
  };
  (void)podscope::xspace::read_xspace_planes(path, count_plane, &header);
  (void)podscope::xspace::read_xspace_planes(path, count_plane, nullptr,
                                             [](std::string_view, std::string_view line) { return line != "skip"; });
  return 0;
}
