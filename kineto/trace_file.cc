#include "kineto/trace_file.h"

#include <simdjson.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "kineto/trace_converter.h"

namespace podscope::kineto {
namespace {

// A buffer with simdjson's padding after its content.
struct PaddedBuffer {
  std::unique_ptr<char[]> data;
  size_t size = 0;
  size_t capacity = 0;  // content capacity; the padding comes after it

  void reserve(size_t n) {
    if (n <= capacity) return;
    std::unique_ptr<char[]> grown(new char[n + simdjson::SIMDJSON_PADDING]);
    if (size > 0) std::memcpy(grown.get(), data.get(), size);
    data = std::move(grown);
    capacity = n;
  }
  std::string_view view() const { return {data.get(), size}; }
};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

absl::Status too_large(const std::filesystem::path& path, uint64_t max_bytes) {
  return absl::ResourceExhaustedError(
      absl::StrCat(path.string(), ": the trace is larger than the ", max_bytes, "-byte bound on Kineto traces"));
}

absl::StatusOr<PaddedBuffer> read_whole(const std::filesystem::path& path, uint64_t max_bytes) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return absl::NotFoundError(absl::StrCat(path.string(), ": ", ec.message()));
  if (size > max_bytes) return too_large(path, max_bytes);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return absl::NotFoundError(absl::StrCat(path.string(), ": cannot open: ", std::strerror(errno)));
  PaddedBuffer buffer;
  buffer.reserve(size);
  buffer.size = std::fread(buffer.data.get(), 1, size, file.get());
  if (buffer.size != size) return absl::DataLossError(absl::StrCat(path.string(), ": short read"));
  return buffer;
}

// The gzip trailer's size (mod 2^32) as a first guess of the inflated size.
size_t inflated_size_hint(const PaddedBuffer& gz) {
  if (gz.size < 18) return 0;
  uint32_t isize = 0;
  std::memcpy(&isize, gz.data.get() + gz.size - 4, 4);  // little-endian, as x86 and the gzip format
  return isize;
}

absl::StatusOr<PaddedBuffer> gunzip(const PaddedBuffer& gz, const std::filesystem::path& path, uint64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return absl::InternalError("zlib: inflateInit2 failed");
  PaddedBuffer out;
  out.reserve(std::min<uint64_t>(std::max<size_t>(inflated_size_hint(gz), 1 << 16), max_bytes));
  z.next_in = reinterpret_cast<Bytef*>(gz.data.get());
  z.avail_in = static_cast<uInt>(std::min<size_t>(gz.size, UINT32_MAX));
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (out.size == out.capacity) {
      if (out.capacity >= max_bytes) {
        inflateEnd(&z);
        return too_large(path, max_bytes);
      }
      out.reserve(std::min<uint64_t>(out.capacity * 2, max_bytes));
    }
    z.next_out = reinterpret_cast<Bytef*>(out.data.get() + out.size);
    z.avail_out = static_cast<uInt>(std::min<size_t>(out.capacity - out.size, UINT32_MAX));
    const uInt before = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    out.size += before - z.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      inflateEnd(&z);
      return absl::DataLossError(
          absl::StrCat(path.string(), ": gzip data is broken: ", z.msg ? z.msg : "inflate failed"));
    }
    if (rc == Z_BUF_ERROR && z.avail_in == 0) {
      inflateEnd(&z);
      return absl::DataLossError(absl::StrCat(path.string(), ": gzip data is truncated"));
    }
  }
  inflateEnd(&z);
  return out;
}

bool is_gzip(const PaddedBuffer& b) {
  return b.size >= 2 && static_cast<unsigned char>(b.data[0]) == 0x1f && static_cast<unsigned char>(b.data[1]) == 0x8b;
}

}  // namespace

absl::StatusOr<tensorflow::profiler::XSpace> read_kineto_trace_file(const std::filesystem::path& path,
                                                                    uint64_t max_bytes, const ProcessRank& fallback) {
  absl::StatusOr<PaddedBuffer> raw = read_whole(path, max_bytes);
  if (!raw.ok()) return raw.status();
  if (is_gzip(*raw)) {
    absl::StatusOr<PaddedBuffer> inflated = gunzip(*raw, path, max_bytes);
    if (!inflated.ok()) return inflated.status();
    raw = std::move(inflated);
  }
  absl::StatusOr<KinetoTrace> trace = parse_kineto_trace(raw->view(), simdjson::SIMDJSON_PADDING);
  raw = PaddedBuffer();  // the text goes before the planes come
  if (!trace.ok())
    return absl::Status(trace.status().code(), absl::StrCat(path.string(), ": ", trace.status().message()));
  if (trace->rank < 0) trace->rank = fallback.rank;
  if (trace->world_size < 0) trace->world_size = fallback.world_size;
  tensorflow::profiler::XSpace space;
  build_xspace(std::move(*trace), space);
  return space;
}

}  // namespace podscope::kineto
