#include "agent/kineto/kineto_trace_directory.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/acl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <vector>

#include "daemon/log.h"

namespace podscope::agent {
namespace {

// How deep a process's own subdirectories are followed when its directory is emptied.
constexpr int kMaxRemovalDepth = 8;

std::string errno_text(int error) { return std::strerror(error); }

struct AclFree {
  void operator()(void* acl) const { acl_free(acl); }
};

// Sets an ACL, given as text, on the directory `fd`: its own (the access ACL) or the one its new entries inherit.
absl::Status set_acl(int fd, acl_type_t type, const std::string& text) {
  std::unique_ptr<void, AclFree> acl(acl_from_text(text.c_str()));
  if (!acl) return absl::InternalError("acl_from_text(" + text + "): " + errno_text(errno));
  // The default ACL can be set through a path only: /proc/self/fd/N names this very directory.
  const int rc = type == ACL_TYPE_ACCESS ? acl_set_fd(fd, static_cast<acl_t>(acl.get()))
                                         : acl_set_file(("/proc/self/fd/" + std::to_string(fd)).c_str(), type,
                                                        static_cast<acl_t>(acl.get()));
  if (rc != 0) return absl::FailedPreconditionError(errno_text(errno));
  return absl::OkStatus();
}

// Removes every entry of the directory `dir_fd`: files, and directories (a process's own) up to `depth` deep.
// Nothing is followed: a symlink is removed as itself.
void remove_entries(int dir_fd, int depth) {
  const int listing = ::dup(dir_fd);
  if (listing < 0) return;
  DIR* dir = ::fdopendir(listing);
  if (dir == nullptr) {
    ::close(listing);
    return;
  }
  ::rewinddir(dir);
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  ::closedir(dir);
  for (const std::string& name : names) {
    if (::unlinkat(dir_fd, name.c_str(), 0) == 0 || errno != EISDIR || depth <= 0) continue;
    const xspace::OwnedFd sub(::openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (sub.get() >= 0) remove_entries(sub.get(), depth - 1);
    ::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR);
  }
}

// Opens `name` in `parent_fd` as a directory of the agent's own, made with `mode` when absent: a directory that is
// someone else's, or a symlink, is refused.
absl::StatusOr<xspace::OwnedFd> own_directory(int parent_fd, const std::string& name, const std::string& path,
                                              mode_t mode) {
  if (::mkdirat(parent_fd, name.c_str(), mode) != 0 && errno != EEXIST) {
    return absl::FailedPreconditionError("cannot make " + path + ": " + errno_text(errno));
  }
  xspace::OwnedFd fd(::openat(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (fd.get() < 0) return absl::FailedPreconditionError("cannot open " + path + ": " + errno_text(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return absl::FailedPreconditionError(path + ": " + errno_text(errno));
  if (st.st_uid != ::geteuid()) {
    return absl::FailedPreconditionError(path + " belongs to uid " + std::to_string(st.st_uid) +
                                         ", not the agent (uid " + std::to_string(::geteuid()) + "): not used");
  }
  if (::fchmod(fd.get(), mode) != 0) return absl::FailedPreconditionError(path + ": chmod: " + errno_text(errno));
  return fd;
}

}  // namespace

std::string_view trace_refusal_name(TraceRefusal refusal) {
  switch (refusal) {
    case TraceRefusal::kSymlink: return "symlink";
    case TraceRefusal::kNotRegularFile: return "not_regular_file";
    case TraceRefusal::kWrongOwner: return "wrong_owner";
    case TraceRefusal::kTooLarge: return "too_large";
    case TraceRefusal::kUnreadable: return "unreadable";
  }
  return "unknown";
}

KinetoTraceDirectory::KinetoTraceDirectory(std::filesystem::path root) : root_(std::move(root)) {}

KinetoTraceDirectory::~KinetoTraceDirectory() {
  if (root_fd_.get() < 0) return;
  remove_entries(root_fd_.get(), kMaxRemovalDepth);
}

absl::Status KinetoTraceDirectory::open_root() {
  if (root_fd_.get() >= 0) return absl::OkStatus();
  if (!root_.is_absolute() || !root_.has_filename()) {
    return absl::InvalidArgumentError("kineto_trace_dir '" + root_.string() + "' is not an absolute directory path");
  }
  std::error_code error;
  std::filesystem::create_directories(root_.parent_path(), error);
  const xspace::OwnedFd parent(::open(root_.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (parent.get() < 0) {
    return absl::FailedPreconditionError("cannot open " + root_.parent_path().string() + ": " + errno_text(errno));
  }
  absl::StatusOr<xspace::OwnedFd> root = own_directory(parent.get(), root_.filename().string(), root_.string(), 0711);
  if (!root.ok()) return root.status();
  // One agent per root: another would empty the directories this one handed out.
  if (::flock(root->get(), LOCK_EX | LOCK_NB) != 0) {
    return absl::FailedPreconditionError(root_.string() + " is in use by another podscope agent (kineto_trace_dir)");
  }
  // What a previous agent left (it stopped without removing it) is nobody's now.
  remove_entries(root->get(), kMaxRemovalDepth);
  root_fd_ = std::move(*root);
  return absl::OkStatus();
}

absl::StatusOr<std::filesystem::path> KinetoTraceDirectory::directory_for(uint32_t uid) {
  const std::string name = std::to_string(uid);
  const std::filesystem::path path = root_ / name;
  if (uid_dirs_.contains(uid)) return path;
  if (absl::Status s = open_root(); !s.ok()) return s;
  absl::StatusOr<xspace::OwnedFd> dir = own_directory(root_fd_.get(), name, path.string(), 0700);
  if (!dir.ok()) return dir.status();
  const uint32_t agent = ::geteuid();
  if (uid != agent) {
    const std::string others = ",g::---,m::rwx,o::---";
    absl::Status s = set_acl(dir->get(), ACL_TYPE_ACCESS, "u::rwx,u:" + std::to_string(uid) + ":rwx" + others);
    if (s.ok()) s = set_acl(dir->get(), ACL_TYPE_DEFAULT, "u::rwx,u:" + std::to_string(agent) + ":rwx" + others);
    if (!s.ok()) {
      ::unlinkat(root_fd_.get(), name.c_str(), AT_REMOVEDIR);
      return absl::FailedPreconditionError("cannot give uid " + std::to_string(uid) + " its directory " +
                                           path.string() + " (an ACL): " + std::string(s.message()));
    }
  }
  uid_dirs_.emplace(uid, std::move(*dir));
  return path;
}

TraceLookup KinetoTraceDirectory::find(uint32_t uid, const std::string& name) const {
  TraceLookup out;
  const auto dir = uid_dirs_.find(uid);
  if (dir == uid_dirs_.end()) return out;
  auto refuse = [&](TraceRefusal refusal, std::string detail) {
    out.outcome = TraceLookup::Outcome::kRefused;
    out.refusal = refusal;
    out.detail = std::move(detail);
    return std::move(out);
  };
  const std::string path = (root_ / std::to_string(uid) / name).string();
  // Never a link followed; a FIFO opened without waiting for a writer; never a terminal taken as controlling one.
  xspace::OwnedFd fd(
      ::openat(dir->second.get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (fd.get() < 0) {
    const int error = errno;
    if (error == ENOENT) return out;
    if (error == ELOOP) return refuse(TraceRefusal::kSymlink, "its trace " + path + " is a symbolic link");
    return refuse(TraceRefusal::kUnreadable, "its trace " + path + " cannot be opened: " + errno_text(error));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return refuse(TraceRefusal::kUnreadable, "its trace " + path + ": " + errno_text(errno));
  }
  if (!S_ISREG(st.st_mode))
    return refuse(TraceRefusal::kNotRegularFile, "its trace " + path + " is not a regular file");
  if (st.st_uid != uid) {
    return refuse(TraceRefusal::kWrongOwner, "its trace " + path + " belongs to uid " + std::to_string(st.st_uid) +
                                                 ", not the process's uid " + std::to_string(uid));
  }
  out.outcome = TraceLookup::Outcome::kOpened;
  out.trace.fd = std::move(fd);
  out.trace.st = st;
  return out;
}

void KinetoTraceDirectory::remove(uint32_t uid, const std::string& name) const {
  const auto dir = uid_dirs_.find(uid);
  if (dir == uid_dirs_.end()) return;
  if (::unlinkat(dir->second.get(), name.c_str(), 0) != 0 && errno == EISDIR) {
    ::unlinkat(dir->second.get(), name.c_str(), AT_REMOVEDIR);
  }
}

void KinetoTraceDirectory::remove_leftovers() const {
  for (const auto& [uid, fd] : uid_dirs_) remove_entries(fd.get(), kMaxRemovalDepth);
}

}  // namespace podscope::agent
