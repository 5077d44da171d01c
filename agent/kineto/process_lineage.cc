#include "agent/kineto/process_lineage.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

#include "kineto/ipc/fabric_message.h"

namespace podscope::agent {
namespace {

// The integers of a status line's value ("PPid:\t812", "NSpid:\t5120\t7").
std::vector<int32_t> integers(std::string_view value) {
  std::vector<int32_t> out;
  size_t at = 0;
  while (at < value.size()) {
    while (at < value.size() && (value[at] == ' ' || value[at] == '\t')) ++at;
    size_t end = at;
    while (end < value.size() && value[end] != ' ' && value[end] != '\t') ++end;
    if (end == at) break;
    int32_t n = 0;
    const auto [ptr, error] = std::from_chars(value.data() + at, value.data() + end, n);
    if (error != std::errc() || ptr != value.data() + end) return {};
    out.push_back(n);
    at = end;
  }
  return out;
}

std::optional<ProcessStatus> read_process_status(int32_t pid) {
  // /proc/<pid>/status is a few KiB; read at most what a status file can hold.
  constexpr size_t kMaxStatusBytes = 64 << 10;
  std::ifstream in("/proc/" + std::to_string(pid) + "/status", std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxStatusBytes, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return parse_process_status(text);
}

}  // namespace

std::optional<ProcessStatus> parse_process_status(std::string_view text) {
  std::optional<std::vector<int32_t>> parent;
  std::optional<std::vector<int32_t>> namespace_pids;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.starts_with("PPid:")) parent = integers(line.substr(5));
    if (line.starts_with("NSpid:")) namespace_pids = integers(line.substr(6));
    at = end + 1;
  }
  if (!parent || parent->size() != 1 || !namespace_pids || namespace_pids->empty()) return std::nullopt;
  return ProcessStatus{parent->front(), std::move(*namespace_pids)};
}

std::string_view lie_name(Lie lie) {
  switch (lie) {
    case Lie::kUnverified: return "unverified";
    case Lie::kForgedPid: return "forged_pid";
    case Lie::kForgedAncestor: return "forged_ancestor";
  }
  return "unknown";
}

std::variant<VerifiedSender, Lie> verify_sender(const std::optional<kineto::ipc::Sender>& sender,
                                                const std::vector<int32_t>& claimed) {
  if (!sender || sender->pid <= 0 || claimed.empty()) return Lie::kUnverified;
  const std::optional<ProcessStatus> self = read_process_status(sender->pid);
  if (!self) return Lie::kUnverified;
  if (claimed.front() != self->namespace_pids.back()) return Lie::kForgedPid;
  VerifiedSender out;
  out.pid = sender->pid;
  out.own_pid = self->namespace_pids.back();
  out.uid = sender->uid;
  // The real chain, as far as the sender's pid namespace reaches: an ancestor in an outer namespace (a container's
  // runtime) has fewer namespace levels and cannot be named by the sender.
  const size_t depth = self->namespace_pids.size();
  std::vector<int32_t> own_ancestors;
  int32_t parent = self->parent;
  for (int32_t i = 0; i < kineto::ipc::kMaxPollPids && parent > 0; ++i) {
    const std::optional<ProcessStatus> p = read_process_status(parent);
    if (!p || p->namespace_pids.size() != depth) break;
    out.ancestors.push_back(parent);
    own_ancestors.push_back(p->namespace_pids.back());
    parent = p->parent;
  }
  for (size_t i = 1; i < claimed.size(); ++i) {
    if (std::find(own_ancestors.begin(), own_ancestors.end(), claimed[i]) == own_ancestors.end()) {
      return Lie::kForgedAncestor;
    }
  }
  return out;
}

}  // namespace podscope::agent
