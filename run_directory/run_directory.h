// A run directory, the one place that names, lists, reads and writes a run's files, as TensorBoard's profile plugin
// lays them out:
//   <logdir>/plugins/profile/<run>/<host>.xplane.pb        one per host (and torch.profiler's *.pt.trace.json[.gz])
//   <logdir>/plugins/profile/<run>/capture.json            what the capture did (pod_capture/capture_files.h)
//   <logdir>/plugins/profile/<run>/pod.*, report.html ...  the pod traces and the analysis outputs, made again from
//                                                          the host files by `podscope analyze`
// Every other part of podscope reaches a run's files through here: the capture writes them, the analysis and the
// pod-trace writer list and read them (run_file_reader.h), and the names of hosts' files are made and undone here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/atomic_file.h"
#include "run_directory/streamed_file.h"
#include "storage/store.h"

namespace podscope::run_directory {

inline constexpr std::string_view kXSpaceSuffix = ".xplane.pb";
inline constexpr std::string_view kCaptureRecordName = "capture.json";

// Where TensorBoard's profile plugin finds a logdir's runs, <logdir>/plugins/profile: what TensorFlow's client sends
// a profiler server as repository_root.
std::filesystem::path profile_root(const std::filesystem::path& logdir);

// Whether a file name is a host's XSpace (*.xplane.pb: TensorBoard shows each as a host).
bool is_xspace_file_name(std::string_view file_name);
// Whether a file name is a torch.profiler trace's (`*.pt.trace.json[.gz]`): such a file is read as a trace whatever
// it holds (a broken one is a bad file of the run, named with its error).
bool is_kineto_trace_file_name(std::string_view file_name);
// Whether a file name is a JSON file's (`*.json`, `*.json.gz`): a Chrome trace, if its content says so.
bool is_json_file_name(std::string_view file_name);

// A host's XSpace file name: "<stem>.xplane.pb".
std::string host_file_name(std::string_view stem);
// A run file's name without `.xplane.pb`, `.pt.trace.json[.gz]` or `.json[.gz]`: the host name of its planes when
// neither its host plane nor its XSpace names one (analysis/steps/step_spans.h, FileSteps::host_name).
std::string file_stem(std::string_view file_name);

// A run: a directory on a local disk or a prefix in a bucket (gs://, s3://), reached through one store
// (storage/store.h) rooted where the runs are (<logdir>/plugins/profile).
class RunDirectory {
 public:
  // The local run directory at `dir` (every path names one, so a path stands for its run directory).
  RunDirectory(const std::filesystem::path& dir);  // NOLINT(google-explicit-constructor)
  RunDirectory(const std::string& dir) : RunDirectory(std::filesystem::path(dir)) {}  // NOLINT
  RunDirectory(const char* dir) : RunDirectory(std::filesystem::path(dir)) {}         // NOLINT
  // The run `name` in the runs' store `runs`.
  RunDirectory(std::shared_ptr<storage::Store> runs, std::string name);

  // The run at `location`: a local path or a bucket URL, whose store is opened with the credentials found for it.
  static absl::StatusOr<RunDirectory> open(std::string_view location);
  // The run `run_name` of the local `logdir`: <logdir>/plugins/profile/<run_name>.
  static RunDirectory in_logdir(const std::filesystem::path& logdir, const std::string& run_name);

  // Claims this run before anything is captured into it, so an unwritable logdir is found before anyone waits for a
  // capture: this run, or when one of its name is there already (the same second, a reused session id), the first
  // free `<name>_N` beside it. An earlier run is never overwritten. (A local claim is atomic; in a bucket, two
  // captures of one name in the same instant could both take it.)
  absl::StatusOr<RunDirectory> claim() const;

  // The run's name (the directory's last component).
  const std::string& name() const { return name_; }
  // Where the run is, as a user would type it; and where one of its files is.
  std::string location() const;
  std::string location_of(std::string_view file_name) const;
  bool in_bucket() const;
  // The local directory (empty for a run in a bucket).
  std::filesystem::path local_path() const;
  // The store the runs are in, and a file's name in it.
  storage::Store& store() const { return *runs_; }
  std::string object_name(std::string_view file_name) const;

  // Every file of the run (not those of a directory inside it), sorted by name, with its size. NotFound when the
  // run is a local directory that is not there.
  absl::StatusOr<std::vector<storage::ObjectInfo>> files() const;
  // Up to `max_bytes` of a file's start (fewer only when the file is shorter).
  absl::StatusOr<std::string> read_head(std::string_view file_name, size_t max_bytes) const;
  // A small file read whole (capture.json), refused past `max_bytes`.
  absl::StatusOr<std::string> read(std::string_view file_name, uint64_t max_bytes) const;

  // Writes one file whole: readers see it whole or not at all.
  absl::Status write(std::string_view file_name, std::string_view content, Durability durability) const;
  // Starts a file written as it is produced (`file` is committed or discarded by its holder).
  absl::Status open_streamed(std::string_view file_name, StreamedFile::Compression compression,
                             StreamedFile& file) const;
  // Removes one file; a file that is not there is no error.
  absl::Status remove(std::string_view file_name) const;
  // Removes the run and everything in it (a run that would lack files must not look whole).
  void remove_all() const;

 private:
  std::shared_ptr<storage::Store> runs_;
  std::string name_;
};

// A profile file: one of a run's, or one given by itself (its directory, or its prefix in a bucket, standing for its
// run).
struct RunFile {
  RunDirectory run;
  std::string name;  // within the run
  uint64_t size = 0;
  std::string version;  // as its store listed it (storage::ObjectInfo)

  std::string location() const { return run.location_of(name); }
};

// The profile files of a run, sorted by name (the order that fixes the global core numbering of TF/JAX device planes,
// for every reader of a run): *.xplane.pb, torch.profiler's *.pt.trace.json[.gz], and any other *.json[.gz] whose
// start is a Chrome trace (kineto::is_chrome_trace_head, read through the run's store, so a run in a bucket is read
// alike), as HTA reads a directory; the run's own JSON outputs are left out. Each other *.json[.gz] left out is named
// in `notes`, with why. NotFound when the run is missing or holds none.
absl::StatusOr<std::vector<RunFile>> list_run_files(const RunDirectory& run, std::vector<std::string>* notes = nullptr);

// The files given (local paths or bucket URLs), sorted as list_run_files sorts a run's, when each is a file that is an
// XSpace (by its name) or a trace (by its name, or its start a Chrome trace); else the error names the first that is
// not.
absl::StatusOr<std::vector<RunFile>> check_run_files(const std::vector<std::string>& locations);

}  // namespace podscope::run_directory
