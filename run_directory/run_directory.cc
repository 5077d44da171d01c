#include "run_directory/run_directory.h"

#include <algorithm>
#include <system_error>

#include "daemon/unique_directory.h"
#include "storage/local_store.h"

namespace podscope::run_directory {
namespace {

// Far more than captures of one name; a bound keeps a hostile bucket from making a claim spin.
constexpr int kMaxSuffix = 10'000;

storage::LocalDurability local_durability(Durability durability) {
  return durability == Durability::kSynced ? storage::LocalDurability::kSynced : storage::LocalDurability::kRebuildable;
}

std::shared_ptr<storage::Store> local_runs(const std::filesystem::path& dir) {
  storage::Location root;
  root.path = dir.empty() ? std::filesystem::path(".") : dir;
  return std::make_shared<storage::LocalStore>(std::move(root));
}

}  // namespace

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

RunDirectory::RunDirectory(const std::filesystem::path& dir) {
  std::filesystem::path normal = dir.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path()) normal = normal.parent_path();
  runs_ = local_runs(normal.parent_path());
  name_ = normal.filename().string();
}

RunDirectory::RunDirectory(std::shared_ptr<storage::Store> runs, std::string name)
    : runs_(std::move(runs)), name_(std::move(name)) {}

absl::StatusOr<RunDirectory> RunDirectory::open(std::string_view location) {
  absl::StatusOr<storage::Location> parsed = storage::parse_location(location);
  if (!parsed.ok()) return parsed.status();
  if (!parsed->in_bucket()) return RunDirectory(parsed->path);
  if (parsed->key.empty()) return absl::InvalidArgumentError(parsed->url() + " is a bucket, not a run in it");
  absl::StatusOr<std::shared_ptr<storage::Store>> runs = storage::open_store(parsed->parent());
  if (!runs.ok()) return runs.status();
  return RunDirectory(std::move(*runs), parsed->name());
}

RunDirectory RunDirectory::in_logdir(const std::filesystem::path& logdir, const std::string& run_name) {
  return RunDirectory(local_runs(profile_root(logdir)), run_name);
}

absl::StatusOr<RunDirectory> RunDirectory::claim() const {
  if (!in_bucket()) {
    absl::StatusOr<std::filesystem::path> claimed = create_unique_directory(runs_->root().path, name_);
    if (!claimed.ok()) return claimed.status();
    return RunDirectory(runs_, claimed->filename().string());
  }
  for (int suffix = 0; suffix <= kMaxSuffix; ++suffix) {
    const std::string candidate = suffix == 0 ? name_ : name_ + "_" + std::to_string(suffix);
    absl::StatusOr<std::vector<storage::ObjectInfo>> taken = runs_->list(candidate + "/");
    if (!taken.ok()) return taken.status();
    if (taken->empty()) return RunDirectory(runs_, candidate);
  }
  return absl::ResourceExhaustedError("no free name for " + location() + " after " + std::to_string(kMaxSuffix) +
                                      " suffixes");
}

std::string RunDirectory::location() const { return runs_->root().child(name_).url(); }

std::string RunDirectory::location_of(std::string_view file_name) const {
  return runs_->root().child(name_).child(file_name).url();
}

bool RunDirectory::in_bucket() const { return runs_->root().in_bucket(); }

std::filesystem::path RunDirectory::local_path() const {
  return in_bucket() ? std::filesystem::path() : runs_->root().path / name_;
}

std::string RunDirectory::object_name(std::string_view file_name) const { return name_ + "/" + std::string(file_name); }

absl::StatusOr<std::vector<RunFile>> RunDirectory::all_files() const {
  absl::StatusOr<std::vector<storage::ObjectInfo>> objects = runs_->list(name_ + "/");
  if (!objects.ok()) return objects.status();
  std::vector<RunFile> files;
  for (storage::ObjectInfo& object : *objects) {
    std::string name = object.name.substr(name_.size() + 1);
    // The run's own files only, not those of a directory inside it.
    if (name.find('/') == std::string::npos) files.push_back({std::move(name), object.size});
  }
  return files;
}

absl::StatusOr<std::vector<RunFile>> RunDirectory::profile_files() const {
  std::error_code ec;
  if (!in_bucket() && !std::filesystem::is_directory(local_path(), ec)) {
    return absl::NotFoundError("run directory " + location() + " does not exist or is not a directory");
  }
  absl::StatusOr<std::vector<RunFile>> all = all_files();
  if (!all.ok()) return all.status();
  std::vector<RunFile> files;
  for (RunFile& file : *all) {
    if (is_profile_file_name(file.name)) files.push_back(std::move(file));
  }
  if (files.empty()) {
    return absl::NotFoundError("run directory " + location() +
                               " has no *.xplane.pb files and no torch.profiler traces (*.pt.trace.json[.gz])");
  }
  return files;
}

absl::StatusOr<std::string> RunDirectory::read(std::string_view file_name, uint64_t max_bytes) const {
  return storage::read_object(*runs_, object_name(file_name), max_bytes);
}

absl::Status RunDirectory::write(std::string_view file_name, std::string_view content, Durability durability) const {
  return storage::write_object(*runs_, object_name(file_name), content, local_durability(durability));
}

absl::Status RunDirectory::open_streamed(std::string_view file_name, StreamedFile::Compression compression,
                                         StreamedFile& file) const {
  absl::StatusOr<std::unique_ptr<storage::ObjectWriter>> writer =
      runs_->create(object_name(file_name), storage::LocalDurability::kRebuildable);
  if (!writer.ok()) return writer.status();
  return file.open(std::move(*writer), location_of(file_name), compression);
}

absl::Status RunDirectory::remove(std::string_view file_name) const { return runs_->remove(object_name(file_name)); }

void RunDirectory::remove_all() const {
  if (!in_bucket()) {
    std::error_code ignored;
    std::filesystem::remove_all(local_path(), ignored);
    return;
  }
  absl::StatusOr<std::vector<storage::ObjectInfo>> objects = runs_->list(name_ + "/");
  if (!objects.ok()) return;
  for (const storage::ObjectInfo& object : *objects) runs_->remove(object.name).IgnoreError();
}

}  // namespace podscope::run_directory
