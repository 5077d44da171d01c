// A run's file written as it is produced (the pod traces, a coordinator's run received by the CLI): bytes go through
// gzip when asked, are buffered, and go to the store's writer (storage/store.h), which publishes the file whole on
// commit: a temporary file renamed into place on a local disk, a completed upload in a bucket. A trace of any size
// never has to fit in memory. A local one is not synced: the pod traces are made again from the run's files
// (`podscope analyze`), and a crash may leave one empty or missing.
#pragma once

#include <zlib.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "storage/store.h"

namespace podscope::run_directory {

class StreamedFile {
 public:
  enum class Compression { kNone, kGzip };

  StreamedFile() = default;
  ~StreamedFile();  // an uncommitted file is given up: nothing of it stays
  StreamedFile(const StreamedFile&) = delete;
  StreamedFile& operator=(const StreamedFile&) = delete;

  // Writes through `writer`; `location` names the file in errors.
  absl::Status open(std::unique_ptr<storage::ObjectWriter> writer, std::string location, Compression compression);
  // Appends `data`; errors are kept and reported by commit.
  void write(std::string_view data);
  absl::Status commit();
  uint64_t bytes_written() const { return raw_bytes_; }  // before compression
  // The first error so far (commit reports it too).
  const absl::Status& status() const { return status_; }

 private:
  void write_out(const char* data, size_t size);
  void flush();
  void deflate_some(int flush);
  void discard();

  std::unique_ptr<storage::ObjectWriter> writer_;
  std::string location_;
  bool gzip_ = false;
  z_stream zstream_{};
  std::string zbuffer_;
  std::string out_;  // bytes for the writer, sent a megabyte at a time
  uint64_t raw_bytes_ = 0;
  absl::Status status_;
};

}  // namespace podscope::run_directory
