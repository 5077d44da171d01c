// Reading and tokenizing /proc and /sys text files — the agent's one way to read them — without allocating in
// the steady state: ProcFile keeps the file open and its buffer between passes (procfs and sysfs regenerate the
// text on every read from offset 0; a read that fails closes the file, so the next one opens it afresh).
#pragma once

#include <array>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace podscope::agent {

class ProcFile {
 public:
  explicit ProcFile(std::string path) : path_(std::move(path)) {}
  ~ProcFile();
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  // The whole file as text; valid until the next read(). NotFound when the file does not exist.
  absl::Status read(std::string_view& text);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
  std::vector<char> buffer_ = std::vector<char>(16384);
};

// Cuts the next line (without '\n') off `text`; false when nothing is left.
inline bool next_line(std::string_view& text, std::string_view& line) {
  if (text.empty()) return false;
  const size_t nl = text.find('\n');
  line = text.substr(0, nl);
  text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
  return true;
}

// Cuts the next whitespace-separated field off `line`; false when nothing is left.
inline bool next_field(std::string_view& line, std::string_view& field) {
  size_t b = line.find_first_not_of(" \t");
  if (b == std::string_view::npos) {
    line = {};
    return false;
  }
  line.remove_prefix(b);
  const size_t e = line.find_first_of(" \t");
  field = line.substr(0, e);
  line.remove_prefix(e == std::string_view::npos ? line.size() : e);
  return true;
}

template <typename T>
inline bool parse_number(std::string_view text, T& value) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  return ec == std::errc() && ptr == text.data() + text.size();
}

// "<path>: line N: <what>" — the reason a collector reports when a file does not parse.
absl::Status parse_error(std::string_view path, int line_number, std::string_view what);

// Reads the numbers that follow on `line` into `columns`, as many as it holds: how many were read, or the error
// naming the row (a `kind` such as "device", and its `name`) and the column that is no number.
template <size_t N>
absl::StatusOr<size_t> next_numbers(std::string_view& line, std::string_view path, int line_number,
                                    std::string_view kind, std::string_view name, std::array<uint64_t, N>& columns) {
  size_t n = 0;
  std::string_view field;
  while (n < columns.size() && next_field(line, field)) {
    if (!parse_number(field, columns[n])) {
      return parse_error(path, line_number,
                         std::string(kind) + " '" + std::string(name) + "' column " + std::to_string(n + 1) +
                             " is not a number: '" + std::string(field) + "'");
    }
    ++n;
  }
  return n;
}

}  // namespace podscope::agent
