#include "run_directory/run_directory.h"

#include <algorithm>
#include <system_error>

#include "daemon/unique_directory.h"

namespace podscope::run_directory {

std::filesystem::path profile_root(const std::filesystem::path& logdir) { return logdir / "plugins" / "profile"; }

bool is_xspace_file_name(std::string_view name) {
  return name.size() > kXSpaceSuffix.size() && name.ends_with(kXSpaceSuffix);
}

bool is_kineto_trace_file_name(std::string_view name) {
  return name.ends_with(".pt.trace.json") || name.ends_with(".pt.trace.json.gz");
}

bool is_profile_file_name(std::string_view name) {
  return is_xspace_file_name(name) || is_kineto_trace_file_name(name);
}

std::string host_file_name(std::string_view stem) { return std::string(stem) + std::string(kXSpaceSuffix); }

std::string file_stem(std::string_view name) {
  for (const std::string_view suffix :
       {kXSpaceSuffix, std::string_view(".pt.trace.json.gz"), std::string_view(".pt.trace.json")}) {
    if (name.size() > suffix.size() && name.ends_with(suffix))
      return std::string(name.substr(0, name.size() - suffix.size()));
  }
  return std::string(name);
}

RunDirectory::RunDirectory(std::filesystem::path dir) : dir_(std::move(dir)) {}

RunDirectory RunDirectory::in_logdir(const std::filesystem::path& logdir, const std::string& run_name) {
  return RunDirectory(profile_root(logdir) / run_name);
}

absl::StatusOr<RunDirectory> RunDirectory::claim() const {
  absl::StatusOr<std::filesystem::path> claimed = create_unique_directory(dir_.parent_path(), name());
  if (!claimed.ok()) return claimed.status();
  return RunDirectory(*claimed);
}

std::string RunDirectory::name() const { return dir_.filename().string(); }

std::string RunDirectory::location() const { return dir_.string(); }

std::filesystem::path RunDirectory::location_of(std::string_view file_name) const { return dir_ / file_name; }

absl::StatusOr<std::vector<RunFile>> RunDirectory::profile_files() const {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir_, ec)) {
    return absl::NotFoundError("run directory " + dir_.string() + " does not exist or is not a directory");
  }
  std::vector<RunFile> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, ec)) {
    std::string name = entry.path().filename().string();
    if (!entry.is_regular_file() || !is_profile_file_name(name)) continue;
    std::error_code size_ec;
    const uintmax_t size = entry.file_size(size_ec);
    files.push_back({std::move(name), size_ec ? 0 : static_cast<uint64_t>(size)});
  }
  if (ec) return absl::InternalError("listing run directory " + dir_.string() + ": " + ec.message());
  if (files.empty()) {
    return absl::NotFoundError("run directory " + dir_.string() +
                               " has no *.xplane.pb files and no torch.profiler traces (*.pt.trace.json[.gz])");
  }
  std::sort(files.begin(), files.end(), [](const RunFile& a, const RunFile& b) { return a.name < b.name; });
  return files;
}

absl::Status RunDirectory::write(std::string_view file_name, std::string_view content, Durability durability) const {
  return write_file_atomically(dir_ / file_name, content, durability);
}

absl::Status RunDirectory::open_streamed(std::string_view file_name, StreamedFile::Compression compression,
                                         StreamedFile& file) const {
  return file.open(dir_ / file_name, compression);
}

absl::Status RunDirectory::remove(std::string_view file_name) const {
  std::error_code ec;
  std::filesystem::remove(dir_ / file_name, ec);
  if (ec) return absl::InternalError("removing " + (dir_ / file_name).string() + ": " + ec.message());
  return absl::OkStatus();
}

void RunDirectory::remove_all() const {
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace podscope::run_directory
