#include "storage/location.h"

#include <algorithm>
#include <vector>

namespace podscope::storage {
namespace {

constexpr size_t kMaxKeyBytes = 1024;  // the longest object name S3 and Cloud Storage accept

bool has_control_byte(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 0x20 || byte == 0x7f;
  });
}

// Bucket names as both services accept them: 3 to 222 lowercase letters, digits, '.', '-' and '_' (Cloud Storage's;
// S3 refuses '_' itself), starting and ending with a letter or digit.
bool valid_bucket_name(std::string_view name) {
  if (name.size() < 3 || name.size() > 222) return false;
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (!alnum(name.front()) || !alnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [&](char c) { return alnum(c) || c == '.' || c == '-' || c == '_'; });
}

absl::Status invalid(std::string_view text, std::string_view why) {
  std::string message = "\"";
  message.append(text).append("\" is not a usable location: ").append(why);
  return absl::InvalidArgumentError(message);
}

}  // namespace

std::string Location::url() const {
  switch (scheme) {
    case Scheme::kLocal: return path.string();
    case Scheme::kS3: return "s3://" + bucket + (key.empty() ? "" : "/" + key);
    case Scheme::kGcs: return "gs://" + bucket + (key.empty() ? "" : "/" + key);
  }
  return "";
}

Location Location::child(std::string_view name) const {
  Location out = *this;
  if (scheme == Scheme::kLocal) {
    out.path = path / name;
  } else {
    out.key = key.empty() ? std::string(name) : key + "/" + std::string(name);
  }
  return out;
}

std::string Location::name() const {
  if (scheme == Scheme::kLocal) return path.filename().string();
  const size_t slash = key.rfind('/');
  return slash == std::string::npos ? key : key.substr(slash + 1);
}

Location Location::parent() const {
  Location out = *this;
  if (scheme == Scheme::kLocal) {
    out.path = path.parent_path();
  } else {
    const size_t slash = key.rfind('/');
    out.key = slash == std::string::npos ? "" : key.substr(0, slash);
  }
  return out;
}

bool is_bucket_url(std::string_view text) { return text.starts_with("gs://") || text.starts_with("s3://"); }

absl::StatusOr<Location> parse_location(std::string_view text) {
  if (text.empty()) return invalid(text, "it is empty");
  if (has_control_byte(text)) return invalid(text, "it holds a control character");
  Location out;
  if (!is_bucket_url(text)) {
    if (const size_t scheme_end = text.find("://"); scheme_end != std::string_view::npos) {
      return invalid(text, "only gs:// and s3:// buckets, or local paths, are supported");
    }
    out.path = std::filesystem::path(text);
    return out;
  }
  out.scheme = text.starts_with("gs://") ? Scheme::kGcs : Scheme::kS3;
  std::string_view rest = text.substr(5);
  const size_t slash = rest.find('/');
  out.bucket = std::string(rest.substr(0, slash));
  if (!valid_bucket_name(out.bucket)) {
    return invalid(text, "bucket name \"" + out.bucket +
                             "\" is not 3-222 lowercase letters, digits, '.', '-' or '_' between letters or digits");
  }
  std::string_view key = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  while (key.ends_with('/')) key.remove_suffix(1);
  if (key.size() > kMaxKeyBytes) return invalid(text, "the key is longer than 1024 bytes");
  if (!key.empty()) {
    for (size_t begin = 0; begin <= key.size();) {
      const size_t end = std::min(key.find('/', begin), key.size());
      const std::string_view component = key.substr(begin, end - begin);
      if (component.empty()) return invalid(text, "the key has an empty component ('//')");
      if (component == "." || component == "..") return invalid(text, "the key has a '.' or '..' component");
      begin = end + 1;
    }
  }
  out.key = std::string(key);
  return out;
}

bool lies_under(const Location& location, const Location& prefix) {
  if (location.scheme != prefix.scheme) return false;
  if (location.scheme == Scheme::kLocal) {
    auto [p, l] = std::mismatch(prefix.path.begin(), prefix.path.end(), location.path.begin(), location.path.end());
    return p == prefix.path.end() || (p->empty() && std::next(p) == prefix.path.end());
  }
  if (location.bucket != prefix.bucket) return false;
  if (prefix.key.empty()) return true;
  return location.key == prefix.key || (location.key.starts_with(prefix.key) && location.key[prefix.key.size()] == '/');
}

}  // namespace podscope::storage
