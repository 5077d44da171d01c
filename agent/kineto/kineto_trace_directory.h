// Where PyTorch processes write the traces the agent asks for. Under the root (`kineto_trace_dir`, made by the agent,
// mode 0711: anyone may pass, no one else may list or write), each uid has a directory of its own, `<root>/<uid>`,
// that only that uid and the agent may enter or write: the agent owns it (mode 0700), an ACL entry gives the uid
// rwx, and its default ACL gives the agent what the uid creates in it. No user can plant a link where another's
// process writes, and no capability is needed (the agent runs without any). The agent opens a delivered trace
// without following a symlink or blocking (a FIFO), and takes only a regular file of the process's uid. All it does
// in the root goes through descriptors opened without following links, so renaming a path under it redirects
// nothing. One agent at a time holds a root (a lock on it).
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "proto/xspace/owned_fd.h"

namespace podscope::agent {

// Why a delivered trace was not taken. Each is counted under its name (trace_refusal_name).
enum class TraceRefusal : uint8_t {
  kSymlink,         // a symbolic link where the trace should be
  kNotRegularFile,  // a FIFO, a directory, a socket, a device
  kWrongOwner,      // a file that is not the traced process's uid's
  kTooLarge,        // beyond what the capture's memory budget leaves (a gzip that inflates past it included)
  kUnreadable,      // it cannot be opened, or is not a trace
};
inline constexpr size_t kTraceRefusalCount = 5;
std::string_view trace_refusal_name(TraceRefusal refusal);

// A delivered trace, opened: the descriptor and what fstat said of it.
struct OpenedTrace {
  xspace::OwnedFd fd;
  struct stat st {};
};

// What looking for a trace found.
struct TraceLookup {
  enum class Outcome { kAbsent, kOpened, kRefused } outcome = Outcome::kAbsent;
  OpenedTrace trace;       // kOpened
  TraceRefusal refusal{};  // kRefused
  std::string detail;      // kRefused: what was found, for the capture's warning
};

class KinetoTraceDirectory {
 public:
  explicit KinetoTraceDirectory(std::filesystem::path root);
  ~KinetoTraceDirectory();  // removes the uid directories and what is in them

  const std::filesystem::path& root() const { return root_; }
  // The directory of `uid`'s processes, made (with the root) on first use. An error says why there is none: the
  // root cannot be made, is not the agent's, or its file system takes no ACLs.
  absl::StatusOr<std::filesystem::path> directory_for(uint32_t uid);
  // Looks for `name` in `uid`'s directory.
  TraceLookup find(uint32_t uid, const std::string& name) const;
  // Removes `name` from `uid`'s directory.
  void remove(uint32_t uid, const std::string& name) const;
  // Removes everything the processes left in their directories.
  void remove_leftovers() const;

 private:
  absl::Status open_root();

  std::filesystem::path root_;
  xspace::OwnedFd root_fd_;
  std::map<uint32_t, xspace::OwnedFd> uid_dirs_;
};

}  // namespace podscope::agent
