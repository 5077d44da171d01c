// A file written as it is produced and published atomically: bytes go to a temporary file beside the
// target (through gzip when asked), and `commit` renames it over the target, so readers see the old file or the
// whole new one, and a trace of any size never has to fit in memory. It is not synced: the pod traces it writes
// are made again from the run's files (`podscope analyze`), and a crash may leave one empty or missing.
#pragma once

#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace podscope::run_directory {

class StreamedFile {
 public:
  enum class Compression { kNone, kGzip };

  StreamedFile() = default;
  ~StreamedFile();  // an uncommitted file is removed
  StreamedFile(const StreamedFile&) = delete;
  StreamedFile& operator=(const StreamedFile&) = delete;

  // Creates the temporary file (and the target's directory).
  absl::Status open(const std::filesystem::path& path, Compression compression);
  // Appends `data`; errors are kept and reported by commit.
  void write(std::string_view data);
  absl::Status commit();
  uint64_t bytes_written() const { return raw_bytes_; }  // before compression
  // The first error so far (commit reports it too).
  const absl::Status& status() const { return status_; }

 private:
  void write_raw(const char* data, size_t size);
  void deflate_some(int flush);
  void fail(std::string_view what);
  void discard();

  std::filesystem::path path_;
  std::string temp_path_;
  std::FILE* file_ = nullptr;
  bool gzip_ = false;
  z_stream zstream_{};
  std::string zbuffer_;
  uint64_t raw_bytes_ = 0;
  absl::Status status_;
};

}  // namespace podscope::run_directory
