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
// Whether a file name is a torch.profiler trace's (*.pt.trace.json, *.pt.trace.json.gz).
bool is_kineto_trace_file_name(std::string_view file_name);
// Whether a file is one a run's analysis reads: an XSpace or a torch.profiler trace.
bool is_profile_file_name(std::string_view file_name);

// A host's XSpace file name: "<stem>.xplane.pb".
std::string host_file_name(std::string_view stem);
// A profile file's name without `.xplane.pb` or `.pt.trace.json[.gz]`: the host name of its planes when neither its
// host plane nor its XSpace names one (analysis/step_spans.h, FileSteps::host_name).
std::string file_stem(std::string_view file_name);

// A profile file of a run, as listed.
struct RunFile {
  std::string name;  // within the run directory
  uint64_t size = 0;
};

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

  // The run's profile files (is_profile_file_name), sorted by name: the order that fixes the global core numbering of
  // TF/JAX device planes, for every reader of a run. NotFound when the run is missing or holds none.
  absl::StatusOr<std::vector<RunFile>> profile_files() const;
  // Every file of the run, whatever it is.
  absl::StatusOr<std::vector<RunFile>> all_files() const;
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

}  // namespace podscope::run_directory
