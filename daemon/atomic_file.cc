#include "daemon/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>
#include <vector>

namespace podscope {
namespace {

constexpr std::string_view kTempMark = ".tmp.";
constexpr size_t kTempSuffixLength = 6;  // mkstemp's XXXXXX

absl::Status errno_error(std::string_view what, const std::filesystem::path& path) {
  return absl::InternalError(std::string(what) + " " + path.string() + ": " + std::strerror(errno));
}

// Whether `name` is a temporary file of an atomic write whose writer is gone: `<name>.tmp.<pid>.XXXXXX` with no
// process of that pid, or `<name>.tmp.XXXXXX` (a writer before the pid was in the name).
bool interrupted_write(std::string_view name) {
  const size_t mark = name.rfind(kTempMark);
  if (mark == std::string_view::npos || name.size() < mark + kTempMark.size() + kTempSuffixLength) return false;
  const std::string_view rest = name.substr(mark + kTempMark.size());
  if (rest.size() == kTempSuffixLength) return true;
  const size_t dot = rest.size() - kTempSuffixLength - 1;
  if (rest[dot] != '.' || dot == 0 || dot > 9) return false;
  const std::string_view digits = rest.substr(0, dot);
  if (digits.find_first_not_of("0123456789") != std::string_view::npos) return false;
  const pid_t pid = static_cast<pid_t>(std::stol(std::string(digits)));
  return pid != getpid() && kill(pid, 0) != 0 && errno == ESRCH;
}

}  // namespace

SweptWrites sweep_interrupted_writes(const std::filesystem::path& root) {
  SweptWrites swept;
  std::vector<std::filesystem::path> found;
  std::error_code error;
  for (std::filesystem::recursive_directory_iterator it(root, error), end; !error && it != end; it.increment(error)) {
    std::error_code kind_error;
    if (it->is_regular_file(kind_error) && interrupted_write(it->path().filename().string()))
      found.push_back(it->path());
  }
  for (const std::filesystem::path& file : found) {
    std::error_code file_error;
    const uintmax_t bytes = std::filesystem::file_size(file, file_error);
    if (!std::filesystem::remove(file, file_error)) continue;
    ++swept.files;
    swept.bytes += file_error ? 0 : bytes;
    const std::filesystem::path dir = file.parent_path();
    std::error_code same_error;
    if (!std::filesystem::equivalent(dir, root, same_error) && std::filesystem::is_empty(dir, file_error) &&
        std::filesystem::remove(dir, file_error)) {
      ++swept.directories;
    }
  }
  return swept;
}

absl::Status write_file_atomically(const std::filesystem::path& path, std::string_view data, Durability durability) {
  const bool synced = durability == Durability::kSynced;
  const std::filesystem::path dir = path.parent_path().empty() ? "." : path.parent_path();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError("creating directory " + dir.string() + ": " + ec.message());
  std::string temp = path.string() + std::string(kTempMark) + std::to_string(getpid()) + ".XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) return errno_error("creating a temporary file for", path);
  auto fail = [&](std::string_view what) {
    absl::Status s = errno_error(what, temp);
    close(fd);
    unlink(temp.c_str());
    return s;
  };
  size_t written = 0;
  while (written < data.size()) {
    const ssize_t n = write(fd, data.data() + written, data.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail("writing");
    }
    written += static_cast<size_t>(n);
  }
  if (fchmod(fd, 0644) != 0) return fail("setting the mode of");
  if (synced && fsync(fd) != 0) return fail("syncing");
  if (close(fd) != 0) {
    unlink(temp.c_str());
    return errno_error("closing", temp);
  }
  if (rename(temp.c_str(), path.c_str()) != 0) {
    absl::Status s = errno_error("renaming into", path);
    unlink(temp.c_str());
    return s;
  }
  if (!synced) return absl::OkStatus();
  // The rename is durable once the directory entry is.
  if (const int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return absl::OkStatus();
}

}  // namespace podscope
