#include "daemon/path_within_root.h"

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

}  // namespace

absl::StatusOr<fs::path> resolve_within_root(const fs::path& root, const fs::path& requested) {
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(root, ec);
  if (ec) return absl::FailedPreconditionError("root " + root.string() + ": " + ec.message());
  const fs::path resolved = fs::weakly_canonical(base / requested, ec);  // an absolute request replaces base
  if (ec) return absl::FailedPreconditionError("path " + requested.string() + ": " + ec.message());
  if (!is_within(resolved, base)) {
    return absl::PermissionDeniedError("'" + requested.string() + "' resolves to '" + resolved.string() +
                                       "', outside the root '" + base.string() + "'");
  }
  return resolved;
}

}  // namespace podscope
