// A local directory as a store: an object is a file, written to a temporary file beside it and renamed into place.
#include "storage/local_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <system_error>

namespace podscope::storage {
namespace {

namespace fs = std::filesystem;

absl::Status errno_error(std::string_view what, const std::string& path) {
  const int error = errno;
  std::string message = std::string(what) + " " + path + ": " + std::strerror(error);
  return error == ENOSPC || error == EDQUOT || error == EFBIG ? absl::ResourceExhaustedError(message)
                                                              : absl::InternalError(message);
}

class LocalWriter : public ObjectWriter {
 public:
  LocalWriter(fs::path path, std::string temp, int fd, LocalDurability durability)
      : path_(std::move(path)), temp_(std::move(temp)), fd_(fd), durability_(durability) {}
  ~LocalWriter() override { abort(); }

  absl::Status write(std::string_view bytes) override {
    if (fd_ < 0) return absl::FailedPreconditionError("writing " + path_.string() + " after its end");
    if (!status_.ok()) return status_;
    while (!bytes.empty()) {
      const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        status_ = errno_error("writing", temp_);
        return status_;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
      written_ += static_cast<uint64_t>(n);
    }
    return absl::OkStatus();
  }

  absl::Status commit() override {
    if (fd_ < 0) return absl::FailedPreconditionError("committing " + path_.string() + " that is not open");
    const bool synced = durability_ == LocalDurability::kSynced;
    if (status_.ok() && synced && ::fsync(fd_) != 0) status_ = errno_error("syncing", temp_);
    if (::close(fd_) != 0 && status_.ok()) status_ = errno_error("closing", temp_);
    fd_ = -1;
    if (status_.ok() && std::rename(temp_.c_str(), path_.c_str()) != 0) {
      status_ = errno_error("renaming into " + path_.string() + " from", temp_);
    }
    if (!status_.ok()) {
      ::unlink(temp_.c_str());
      return status_;
    }
    if (synced) {
      // The rename is durable once the directory entry is.
      if (const int dir = ::open(path_.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
        ::fsync(dir);
        ::close(dir);
      }
    }
    return absl::OkStatus();
  }

  void abort() override {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    ::unlink(temp_.c_str());
  }

  uint64_t bytes_written() const override { return written_; }

 private:
  fs::path path_;
  std::string temp_;
  int fd_;
  LocalDurability durability_;
  uint64_t written_ = 0;
  absl::Status status_;
};

class LocalReader : public ObjectReader {
 public:
  LocalReader(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~LocalReader() override { ::close(fd_); }

  absl::StatusOr<size_t> read(char* buffer, size_t size) override {
    while (true) {
      const ssize_t n = ::read(fd_, buffer, size);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno != EINTR) return errno_error("reading", path_);
    }
  }

 private:
  std::string path_;
  int fd_;
};

// A file's size and version (its inode and modification time: a file written again is renamed into place as a new
// inode, and one rewritten in place gets a new time); empty when it cannot be read (errno says why).
std::optional<ObjectInfo> info_of(const fs::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  ObjectInfo info;
  info.size = static_cast<uint64_t>(st.st_size);
  info.version =
      std::to_string(st.st_ino) + ":" + std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
  return info;
}

}  // namespace

LocalStore::LocalStore(Location root) : Store(std::move(root)) {}

absl::StatusOr<std::unique_ptr<ObjectWriter>> LocalStore::create(std::string_view name, LocalDurability durability) {
  const fs::path path = root().path / name;
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  if (ec) return absl::InternalError("creating directory " + path.parent_path().string() + ": " + ec.message());
  std::string temp = path.string() + ".tmp.XXXXXX";
  const int fd = ::mkstemp(temp.data());
  if (fd < 0) return errno_error("creating a temporary file for", path.string());
  ::fchmod(fd, 0644);
  return std::make_unique<LocalWriter>(path, std::move(temp), fd, durability);
}

absl::StatusOr<std::unique_ptr<ObjectReader>> LocalStore::open(std::string_view name) {
  const std::string path = (root().path / name).string();
  // Not blocking on a FIFO put where a file was listed; only a regular file is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    return errno == ENOENT ? absl::NotFoundError("no file " + path) : errno_error("opening", path);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::NotFoundError(path + " is not a regular file");
  }
  return std::make_unique<LocalReader>(path, fd);
}

absl::StatusOr<std::vector<ObjectInfo>> LocalStore::list(std::string_view prefix) {
  std::vector<ObjectInfo> out;
  // The directory holding the prefix's last component: only it and what is below it can match.
  const size_t slash = prefix.rfind('/');
  const fs::path start = slash == std::string_view::npos ? root().path : root().path / prefix.substr(0, slash);
  std::error_code ec;
  if (!fs::is_directory(start, ec)) return out;
  for (auto it = fs::recursive_directory_iterator(start, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    std::string name = it->path().lexically_relative(root().path).generic_string();
    if (!name.starts_with(prefix) || name.find(".tmp.") != std::string::npos) continue;
    std::optional<ObjectInfo> info = info_of(it->path());
    if (!info) continue;  // gone since it was listed
    info->name = std::move(name);
    out.push_back(*std::move(info));
  }
  if (ec) return absl::InternalError("listing " + start.string() + ": " + ec.message());
  std::sort(out.begin(), out.end(), [](const ObjectInfo& a, const ObjectInfo& b) { return a.name < b.name; });
  return out;
}

absl::StatusOr<ObjectInfo> LocalStore::stat(std::string_view name) {
  const fs::path path = root().path / name;
  std::optional<ObjectInfo> info = info_of(path);
  if (!info) return absl::NotFoundError("no file " + path.string() + ": " + std::strerror(errno));
  info->name = std::string(name);
  return *std::move(info);
}

absl::Status LocalStore::remove(std::string_view name) {
  const fs::path path = root().path / name;
  std::error_code ec;
  fs::remove(path, ec);
  if (ec) return absl::InternalError("removing " + path.string() + ": " + ec.message());
  return absl::OkStatus();
}

absl::Status LocalStore::check_writable() {
  absl::StatusOr<std::unique_ptr<ObjectWriter>> probe = create(".podscope-write-check", LocalDurability::kRebuildable);
  if (!probe.ok()) return probe.status();
  (*probe)->abort();
  return absl::OkStatus();
}

std::optional<std::string> LocalStore::local_file(std::string_view name) const { return (root().path / name).string(); }

}  // namespace podscope::storage
