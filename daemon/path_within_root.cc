#include "daemon/path_within_root.h"

#include <algorithm>

#include <string>

#include "absl/status/status.h"

namespace podscope {
namespace fs = std::filesystem;

namespace {

bool is_within(const fs::path& inner, const fs::path& outer) {
  auto o = outer.begin();
  auto i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

bool contains_nul(const fs::path& path) { return path.native().find('\0') != fs::path::string_type::npos; }

}  // namespace

bool is_plain_path_component(std::string_view name) {
  // Control characters (a newline, ESC) would make a directory that listings and logs show as something else.
  const bool control =
      std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7F; });
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos && !control;
}

absl::StatusOr<fs::path> resolve_within_root(const fs::path& root, const fs::path& requested) {
  for (const fs::path* path : {&root, &requested}) {
    if (contains_nul(*path)) {
      std::string message = "path '";
      message.append(path->string()).append("' contains a NUL byte");
      return absl::InvalidArgumentError(message);
    }
  }
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(root, ec);
  if (ec) return absl::FailedPreconditionError("root " + root.string() + ": " + ec.message());
  const fs::path resolved = fs::weakly_canonical(base / requested, ec);  // an absolute request replaces base
  if (ec) return absl::FailedPreconditionError("path " + requested.string() + ": " + ec.message());
  if (!is_within(resolved, base)) {
    // Built with append: GCC 12 gives a false -Wrestrict on chained operator+ with a literal first.
    std::string message = "'";
    message.append(requested.string()).append("' resolves to '").append(resolved.string());
    message.append("', outside the root '").append(base.string()).append("'");
    return absl::PermissionDeniedError(message);
  }
  return resolved;
}

absl::StatusOr<fs::path> confine_to_root(const fs::path& root, const fs::path& requested,
                                         const ConfinementRefusals& refusals) {
  if (root.empty()) return absl::FailedPreconditionError(std::string(refusals.no_root));
  absl::StatusOr<fs::path> resolved = resolve_within_root(root, requested);
  if (absl::IsPermissionDenied(resolved.status())) {
    std::string message(refusals.outside_prefix);
    message.append(std::string(resolved.status().message()));
    return absl::Status(refusals.outside_code, message);
  }
  return resolved;
}

}  // namespace podscope
