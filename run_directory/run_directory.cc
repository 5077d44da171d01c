#include "run_directory/run_directory.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <set>
#include <system_error>

#include "daemon/unique_directory.h"
#include "kineto/trace_file.h"
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

bool is_json_file_name(std::string_view name) {
  for (const std::string_view suffix : {std::string_view(".json"), std::string_view(".json.gz")}) {
    if (name.size() > suffix.size() && name.ends_with(suffix)) return true;
  }
  return false;
}

std::string host_file_name(std::string_view stem) { return std::string(stem) + std::string(kXSpaceSuffix); }

std::string file_stem(std::string_view name) {
  for (const std::string_view suffix :
       {kXSpaceSuffix, std::string_view(".pt.trace.json.gz"), std::string_view(".pt.trace.json"),
        std::string_view(".json.gz"), std::string_view(".json")}) {
    if (name.size() > suffix.size() && name.ends_with(suffix))
      return std::string(name.substr(0, name.size() - suffix.size()));
  }
  return std::string(name);
}

RunDirectory::RunDirectory(const std::filesystem::path& dir) {
  std::filesystem::path normal = dir.lexically_normal();
  if (!normal.has_filename() && normal.has_parent_path()) normal = normal.parent_path();
  // "." or ".." names no directory by itself: the one it stands for does.
  if (normal.filename() == "." || normal.filename() == "..")
    normal = std::filesystem::absolute(normal).lexically_normal();
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

absl::StatusOr<std::vector<storage::ObjectInfo>> RunDirectory::files() const {
  std::error_code ec;
  if (!in_bucket() && !std::filesystem::is_directory(local_path(), ec)) {
    return absl::NotFoundError("run directory " + location() + " does not exist or is not a directory");
  }
  absl::StatusOr<std::vector<storage::ObjectInfo>> objects = runs_->list(name_ + "/");
  if (!objects.ok()) return objects.status();
  std::vector<storage::ObjectInfo> files;
  for (storage::ObjectInfo& object : *objects) {
    std::string name = object.name.substr(name_.size() + 1);
    // The run's own files only, not those of a directory inside it.
    if (name.find('/') == std::string::npos) files.push_back({std::move(name), object.size, std::move(object.version)});
  }
  return files;
}

absl::StatusOr<std::string> RunDirectory::read_head(std::string_view file_name, size_t max_bytes) const {
  absl::StatusOr<std::unique_ptr<storage::ObjectReader>> reader = runs_->open(object_name(file_name));
  if (!reader.ok()) return reader.status();
  std::string head(max_bytes, '\0');
  size_t got = 0;
  while (got < max_bytes) {
    absl::StatusOr<size_t> n = (*reader)->read(head.data() + got, max_bytes - got);
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    got += *n;
  }
  head.resize(got);
  return head;
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

namespace {

// A JSON file that a capture or an analysis wrote into the run: capture.json, the pod traces (pod.trace.json.gz,
// pod.<window>.trace.json.gz) and each tool's result, which is written as <stem>.pb beside <stem>.json.
bool is_run_output(const std::set<std::string, std::less<>>& names, std::string_view name) {
  if (name == kCaptureRecordName || (name.starts_with("pod.") && name.ends_with(".trace.json.gz"))) return true;
  if (!name.ends_with(".json")) return false;
  const std::string stem(name.substr(0, name.size() - std::string_view(".json").size()));
  return names.contains(stem + ".pb") || (stem.ends_with(".pb") && names.contains(stem));
}

// Whether a file's start is a Chrome trace's. A file that cannot be read is none.
bool is_chrome_trace(const RunDirectory& run, std::string_view name) {
  absl::StatusOr<std::string> head = run.read_head(name, kineto::kChromeTraceHeadBytes);
  return head.ok() && kineto::is_chrome_trace_head(*head);
}

// Where a file given by itself is: its run (its directory) and its size. NotFound when it is no file.
absl::StatusOr<RunFile> given_file(const std::string& location) {
  absl::StatusOr<storage::Location> parsed = storage::parse_location(location);
  if (!parsed.ok()) return parsed.status();
  std::optional<RunDirectory> run;
  if (parsed->in_bucket()) {
    if (parsed->parent().key.empty()) return absl::InvalidArgumentError(location + " is not in a run's prefix");
    absl::StatusOr<std::shared_ptr<storage::Store>> store = storage::open_store(parsed->parent().parent());
    if (!store.ok()) return store.status();
    run.emplace(std::move(*store), parsed->parent().name());
  } else {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(parsed->path, ec)) return absl::NotFoundError(location + " is not a file");
    const std::filesystem::path dir = parsed->path.parent_path();
    run.emplace(dir.empty() ? std::filesystem::path(".") : dir);
  }
  absl::StatusOr<storage::ObjectInfo> object = run->store().stat(run->object_name(parsed->name()));
  if (!object.ok()) return absl::NotFoundError(location + " is not a file: " + std::string(object.status().message()));
  return RunFile{*std::move(run), parsed->name(), object->size, std::move(object->version)};
}

}  // namespace

absl::StatusOr<std::vector<RunFile>> list_run_files(const RunDirectory& run, std::vector<std::string>* notes) {
  absl::StatusOr<std::vector<storage::ObjectInfo>> all = run.files();
  if (!all.ok()) return all.status();
  std::set<std::string, std::less<>> names;
  for (const storage::ObjectInfo& file : *all) names.insert(file.name);
  std::vector<RunFile> files;
  std::vector<std::string> ignored;
  for (storage::ObjectInfo& file : *all) {
    if (is_xspace_file_name(file.name) || is_kineto_trace_file_name(file.name)) {
      files.push_back({run, std::move(file.name), file.size, std::move(file.version)});
    } else if (is_json_file_name(file.name) && !is_run_output(names, file.name)) {
      // Any other JSON file is read if its content is a Chrome trace, as HTA and Perfetto's UI read it.
      if (is_chrome_trace(run, file.name)) {
        files.push_back({run, std::move(file.name), file.size, std::move(file.version)});
      } else {
        ignored.push_back(std::move(file.name));
      }
    }
  }
  if (files.empty()) {
    return absl::NotFoundError("run directory " + run.location() +
                               " has no *.xplane.pb files and no Chrome traces (*.json[.gz] with traceEvents, as "
                               "torch.profiler writes)");
  }
  // Listed by name already: file order fixes the global core numbering of TF/JAX device planes.
  if (notes != nullptr) {
    for (const std::string& name : ignored) {
      notes->push_back("ignored " + name + ": not a Chrome trace (no traceEvents array in its first " +
                       std::to_string(kineto::kChromeTraceHeadBytes >> 10) + " KiB)");
    }
  }
  return files;
}

absl::StatusOr<std::vector<RunFile>> check_run_files(const std::vector<std::string>& locations) {
  std::vector<RunFile> files;
  for (const std::string& location : locations) {
    absl::StatusOr<RunFile> file = given_file(location);
    if (!file.ok()) return file.status();
    if (!is_xspace_file_name(file->name) && !is_kineto_trace_file_name(file->name) &&
        !is_chrome_trace(file->run, file->name)) {
      return absl::InvalidArgumentError(
          location + " is neither an XSpace (*.xplane.pb) nor a Chrome trace (JSON with traceEvents)");
    }
    files.push_back(*std::move(file));
  }
  std::sort(files.begin(), files.end(), [](const RunFile& a, const RunFile& b) { return a.location() < b.location(); });
  return files;
}

}  // namespace podscope::run_directory
