#include "agent/collectors/proc_text.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace podscope::agent {

ProcFile::~ProcFile() {
  if (fd_ >= 0) close(fd_);
}

absl::Status ProcFile::read(std::string_view& text) {
  if (fd_ < 0) {
    fd_ = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      const int err = errno;
      const std::string message = path_ + ": " + std::strerror(err);
      return err == ENOENT ? absl::NotFoundError(message) : absl::UnavailableError(message);
    }
  }
  size_t used = 0;
  for (;;) {
    if (used == buffer_.size()) buffer_.resize(buffer_.size() * 2);  // only when the file grew
    const ssize_t n = pread(fd_, buffer_.data() + used, buffer_.size() - used, static_cast<off_t>(used));
    if (n < 0) {
      const int err = errno;
      close(fd_);
      fd_ = -1;
      return absl::UnavailableError(path_ + ": read failed: " + std::strerror(err));
    }
    if (n == 0) break;
    used += static_cast<size_t>(n);
  }
  text = std::string_view(buffer_.data(), used);
  return absl::OkStatus();
}

absl::Status parse_error(std::string_view path, int line_number, std::string_view what) {
  return absl::DataLossError(std::string(path) + ": line " + std::to_string(line_number) + ": " + std::string(what));
}

}  // namespace podscope::agent
