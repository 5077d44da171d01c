// Who a polling Kineto process is, by the kernel's word: the sender's pid from its datagram's credentials, the pid
// it knows itself by in its own pid namespace (a container's), and its real ancestors, read from /proc. A poll's
// payload names the process and its ancestors as Kineto saw them; a pid there that is not the sender, or an
// ancestor that is not one of the sender's, is a lie.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "kineto/ipc/fabric_endpoint.h"

namespace podscope::agent {

// What /proc/<pid>/status says of a process: its parent and its pid in each pid namespace it is in, from the
// reader's namespace (first) to its own (last).
struct ProcessStatus {
  int32_t parent = 0;
  std::vector<int32_t> namespace_pids;
};

// Parses the text of /proc/<pid>/status; nothing when it names no PPid or NSpid.
std::optional<ProcessStatus> parse_process_status(std::string_view text);

// A sender whose claims hold.
struct VerifiedSender {
  int32_t pid = 0;                 // in the agent's pid namespace: what /proc here is keyed by
  int32_t own_pid = 0;             // in its own pid namespace: what Kineto writes and names its trace files with
  uint32_t uid = 0;                // the sender's (real) uid
  std::vector<int32_t> ancestors;  // in the agent's pid namespace, parent first, as far as its namespace reaches
};

// Why a sender's claims do not hold. Each is counted under its name (lie_name).
enum class Lie : uint8_t {
  kUnverified,      // no credentials, a pid this namespace cannot see, or a process gone before it was read
  kForgedPid,       // the payload's process is not the sender
  kForgedAncestor,  // the payload names an ancestor the sender does not have
};
std::string_view lie_name(Lie lie);

// Reads /proc/<pid>/status of the sender and its ancestors. `claimed` is the payload's process then its ancestors
// (a registration: the process alone), in the sender's own pid namespace.
std::variant<VerifiedSender, Lie> verify_sender(const std::optional<kineto::ipc::Sender>& sender,
                                                const std::vector<int32_t>& claimed);

}  // namespace podscope::agent
