#include "kineto/trace_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kineto/trace_converter.h"
#include "kineto/trace_json_splitter.h"
#include "proto/xspace/owned_fd.h"

namespace podscope::kineto {
namespace {

// How much of the file is read, and inflated, at a time.
constexpr size_t kChunkBytes = size_t{1} << 20;
// Deflate's best ratio is about 1032:1: a gzip never inflates to more than this many times its size.
constexpr uint64_t kMaxInflateRatio = 1032;
// How much text of a gzip head is inflated to look for its traceEvents.
constexpr size_t kMaxHeadTextBytes = size_t{8} << 20;

absl::Status too_large(const std::string& name, uint64_t max_bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat(name, ": the trace is larger than the ", max_bytes, "-byte bound on Kineto traces"));
}

bool is_gzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// Reads up to `buffer.size()` bytes (fewer only at the end of the trace).
absl::StatusOr<size_t> read_some(const TraceReadFn& read, std::vector<char>& buffer) {
  size_t got = 0;
  while (got < buffer.size()) {
    absl::StatusOr<size_t> n = read(buffer.data() + got, buffer.size() - got);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    got += *n;
  }
  return got;
}

// A local file's bytes, front to back.
TraceReadFn file_reader(int fd, const std::filesystem::path& path) {
  return [fd, &path](char* buffer, size_t size) -> absl::StatusOr<size_t> {
    while (true) {
      const ssize_t n = ::read(fd, buffer, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR)
        return absl::DataLossError(absl::StrCat(path.string(), ": read failed: ", std::strerror(errno)));
    }
  };
}

// The inflated size a gzip's trailer states (mod 2^32), no more than its data could inflate to: a first guess.
uint64_t inflated_size_hint(int fd, uint64_t file_size) {
  if (file_size < 18) return 0;
  uint32_t isize = 0;  // little-endian, as x86 and the gzip format
  if (::pread(fd, &isize, sizeof isize, static_cast<off_t>(file_size - 4)) != sizeof isize) return 0;
  return std::min<uint64_t>(isize, file_size * kMaxInflateRatio);
}

// Hands `parser` the text of a gzip whose first `got` bytes are in `raw`, inflated a chunk at a time, at most
// `max_bytes` of it.
absl::Status inflate_into(KinetoTraceParser& parser, const TraceReadFn& read, std::vector<char>& raw, size_t got,
                          const std::string& name, uint64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return absl::InternalError("zlib: inflateInit2 failed");
  const std::unique_ptr<z_stream, int (*)(z_stream*)> end(&z, inflateEnd);
  std::vector<char> out(kChunkBytes);
  z.next_in = reinterpret_cast<Bytef*>(raw.data());
  z.avail_in = static_cast<uInt>(got);
  bool input_left = got == raw.size();
  while (true) {
    if (z.avail_in == 0 && input_left) {
      absl::StatusOr<size_t> more = read_some(read, raw);
      if (!more.ok()) return more.status();
      input_left = *more == raw.size();
      z.next_in = reinterpret_cast<Bytef*>(raw.data());
      z.avail_in = static_cast<uInt>(*more);
    }
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = out.size() - z.avail_out;
    if (z.total_out > max_bytes) return too_large(name, max_bytes);
    if (produced > 0) {
      if (absl::Status s = parser.feed(std::string_view(out.data(), produced)); !s.ok()) return s;
    }
    if (rc == Z_STREAM_END) return absl::OkStatus();
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      return absl::DataLossError(absl::StrCat(name, ": gzip data is broken: ", z.msg ? z.msg : "inflate failed"));
    }
    if (z.avail_in == 0 && !input_left && produced == 0) {
      return absl::DataLossError(absl::StrCat(name, ": gzip data is truncated"));
    }
  }
}

// Reads and parses one trace, plain or gzip, `size` bytes read a chunk at a time: the text is never held whole.
// `gzip_text_size` guesses what a gzip inflates to (0: unknown).
absl::StatusOr<KinetoTrace> parse_trace(const std::string& name, uint64_t size, const TraceReadFn& read,
                                        const std::function<uint64_t()>& gzip_text_size, uint64_t max_bytes,
                                        const ProcessRank& fallback) {
  if (size > max_bytes) return too_large(name, max_bytes);
  std::vector<char> raw(kChunkBytes);
  absl::StatusOr<size_t> got = read_some(read, raw);
  if (!got.ok()) return got.status();
  const bool gzip = is_gzip(std::string_view(raw.data(), *got));
  KinetoTraceParser parser(std::min(max_bytes, gzip ? gzip_text_size() : size));
  absl::Status status;
  if (gzip) {
    status = inflate_into(parser, read, raw, *got, name, max_bytes);
  } else {
    uint64_t total = 0;
    for (size_t n = *got; status.ok() && n > 0;) {
      total += n;
      if (total > max_bytes) return too_large(name, max_bytes);
      status = parser.feed(std::string_view(raw.data(), n));
      if (!status.ok() || n < raw.size()) break;
      absl::StatusOr<size_t> more = read_some(read, raw);
      if (!more.ok()) return more.status();
      n = *more;
    }
  }
  if (!status.ok()) {
    if (absl::StartsWith(status.message(), name)) return status;
    return absl::Status(status.code(), absl::StrCat(name, ": ", status.message()));
  }
  absl::StatusOr<KinetoTrace> trace = parser.finish();
  if (!trace.ok()) return absl::Status(trace.status().code(), absl::StrCat(name, ": ", trace.status().message()));
  if (trace->rank < 0) trace->rank = fallback.rank;
  if (trace->world_size < 0) trace->world_size = fallback.world_size;
  return trace;
}

// parse_trace of a local file.
absl::StatusOr<KinetoTrace> parse_trace_file(const std::filesystem::path& path, uint64_t max_bytes,
                                             const ProcessRank& fallback) {
  const xspace::OwnedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open: ", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path.string(), ": cannot stat: ", std::strerror(errno)));
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  return parse_trace(
      path.string(), file_size, file_reader(fd.get(), path), [&] { return inflated_size_hint(fd.get(), file_size); },
      max_bytes, fallback);
}

// What the head of a gzip inflates to, as far as it goes, at most kMaxHeadTextBytes, fed to `splitter` until it
// reaches the events.
void inflate_head(std::string_view head, TraceJsonSplitter& splitter) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return;
  const std::unique_ptr<z_stream, int (*)(z_stream*)> end(&z, inflateEnd);
  std::vector<char> out(64 << 10);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(head.data()));
  z.avail_in = static_cast<uInt>(head.size());
  while (!splitter.reached_events() && z.total_out < kMaxHeadTextBytes) {
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    const int rc = inflate(&z, Z_NO_FLUSH);
    const size_t produced = out.size() - z.avail_out;
    if (produced > 0 && !splitter.feed(std::string_view(out.data(), produced)).ok()) return;
    if (rc != Z_OK || produced == 0) return;
  }
}

}  // namespace

bool is_chrome_trace_head(std::string_view head) {
  TraceJsonSplitter splitter([](std::string_view) { return absl::OkStatus(); }, {});
  if (is_gzip(head)) {
    inflate_head(head, splitter);
  } else {
    for (size_t at = 0; at < head.size() && !splitter.reached_events(); at += 64 << 10) {
      if (!splitter.feed(head.substr(at, 64 << 10)).ok()) break;
    }
  }
  return splitter.reached_events();
}

absl::StatusOr<tensorflow::profiler::XSpace> read_kineto_trace_file(const std::filesystem::path& path,
                                                                    uint64_t max_bytes, const ProcessRank& fallback) {
  absl::StatusOr<KinetoTrace> trace = parse_trace_file(path, max_bytes, fallback);
  if (!trace.ok()) return trace.status();
  tensorflow::profiler::XSpace space;
  build_xspace(std::move(*trace), space);
  return space;
}

absl::StatusOr<std::string> convert_kineto_trace(std::string_view name, uint64_t size, const TraceReadFn& read,
                                                 uint64_t max_bytes) {
  absl::StatusOr<KinetoTrace> trace =
      parse_trace(std::string(name), size, read, [] { return uint64_t{0}; }, max_bytes, {});
  if (!trace.ok()) return trace.status();
  return build_xspace_bytes(std::move(*trace));
}

absl::StatusOr<std::string> convert_kineto_trace_file(const std::filesystem::path& path, uint64_t max_bytes) {
  absl::StatusOr<KinetoTrace> trace = parse_trace_file(path, max_bytes, {});
  if (!trace.ok()) return trace.status();
  return build_xspace_bytes(std::move(*trace));
}

}  // namespace podscope::kineto
