#include "run_directory/run_file_reader.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <simdjson.h>

#include "kineto/trace_file.h"
#include "proto/xspace/names.h"
#include "proto/xspace/xplane_builder.h"
#include "proto/xspace/xplane_reader.h"

namespace podscope::run_directory {
namespace {

// An object of a bucket as protobuf's input stream, read as it arrives.
class ObjectInputStream : public google::protobuf::io::CopyingInputStream {
 public:
  explicit ObjectInputStream(std::unique_ptr<storage::ObjectReader> reader) : reader_(std::move(reader)) {}
  int Read(void* buffer, int size) override {
    absl::StatusOr<size_t> n = reader_->read(static_cast<char*>(buffer), static_cast<size_t>(size));
    return n.ok() ? static_cast<int>(*n) : -1;
  }

 private:
  std::unique_ptr<storage::ObjectReader> reader_;
};

class ObjectStream : public google::protobuf::io::CopyingInputStreamAdaptor {
 public:
  explicit ObjectStream(std::unique_ptr<storage::ObjectReader> reader)
      : CopyingInputStreamAdaptor(new ObjectInputStream(std::move(reader)), 1 << 20) {
    SetOwnsCopyingStream(true);
  }
};

// Converts the trace `file`, read as it streams from its store (a local file is read by its path: its gzip trailer
// sizes what its events take).
absl::StatusOr<std::string> convert_trace(const RunFile& file) {
  const std::string object = file.run.object_name(file.name);
  if (const std::optional<std::string> local = file.run.store().local_file(object)) {
    return kineto::convert_kineto_trace_file(*local);
  }
  absl::StatusOr<std::unique_ptr<storage::ObjectReader>> reader = file.run.store().open(object);
  if (!reader.ok()) return reader.status();
  return kineto::convert_kineto_trace(file.location(), file.size,
                                      [&](char* buffer, size_t size) { return (*reader)->read(buffer, size); });
}

}  // namespace

const std::map<std::string, RunFileReader::FileClock>& RunFileReader::clocks_of(const RunDirectory& run) {
  const std::lock_guard<std::mutex> lock(mutex_);
  auto [it, fresh] = clocks_.try_emplace(run.location());
  if (!fresh) return it->second;
  // A run without a capture.json (TensorFlow's) has no clocks to give.
  absl::StatusOr<std::string> json = run.read(kCaptureRecordName, 64 << 20);
  if (!json.ok()) return it->second;
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  simdjson::dom::array hosts;
  if (parser.parse(*json).get(doc) != simdjson::SUCCESS || doc["hosts"].get(hosts) != simdjson::SUCCESS) {
    return it->second;
  }
  for (simdjson::dom::element host : hosts) {
    std::string_view file;
    FileClock clock;
    if (host["file"].get(file) != simdjson::SUCCESS || file.empty() ||
        host["clock_offset_ns"].get(clock.offset_ns) != simdjson::SUCCESS) {
      continue;
    }
    if (host["clock_rtt_ns"].get(clock.rtt_ns) != simdjson::SUCCESS) clock.rtt_ns = 0;
    it->second.emplace(std::string(file), clock);
  }
  return it->second;
}

std::optional<int64_t> RunFileReader::recorded_clock_offset_ns(const RunFile& file) {
  const std::map<std::string, FileClock>& clocks = clocks_of(file.run);
  const auto clock = clocks.find(file.name);
  if (clock == clocks.end()) return std::nullopt;
  return clock->second.offset_ns;
}

absl::Status RunFileReader::read_planes(
    const RunFile& file, const std::function<absl::Status(const tensorflow::profiler::XPlane&)>& on_plane,
    xspace::XSpaceHeader* header, const xspace::XLineFilter& keep_line) {
  const RunDirectory& run = file.run;
  const std::string location = file.location();
  if (is_xspace_file_name(file.name)) {
    const std::map<std::string, FileClock>& clocks = clocks_of(run);
    const auto clock = clocks.find(file.name);
    const auto stamped = [&](tensorflow::profiler::XPlane& plane) {
      if (clock != clocks.end() && !xspace::XPlaneReader(plane).int_stat(xspace::kClockOffsetStat)) {
        xspace::XPlaneBuilder(&plane)
            .stats()
            .add(xspace::kClockOffsetStat, clock->second.offset_ns)
            .add(xspace::kClockRttStat, clock->second.rtt_ns);
      }
      return on_plane(plane);
    };
    if (const std::optional<std::string> local = run.store().local_file(run.object_name(file.name))) {
      return xspace::read_xspace_planes(*local, stamped, header, keep_line);
    }
    xspace::XSpaceSource source;
    source.name = location;
    source.size = static_cast<int64_t>(file.size);
    source.open = [&]() -> absl::StatusOr<std::unique_ptr<google::protobuf::io::ZeroCopyInputStream>> {
      absl::StatusOr<std::unique_ptr<storage::ObjectReader>> reader = run.store().open(run.object_name(file.name));
      if (!reader.ok()) return reader.status();
      return std::make_unique<ObjectStream>(std::move(*reader));
    };
    return xspace::read_xspace_planes(source, stamped, header, keep_line);
  }
  absl::StatusOr<std::string> fresh;
  const absl::StatusOr<std::string>* space = nullptr;
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    if (const auto kept = converted_.find(location); kept != converted_.end()) space = &kept->second;
  }
  if (space == nullptr) {
    // Converted outside the lock (other threads convert their own files meanwhile); a map's entries stay put.
    fresh = convert_trace(file);
    const uint64_t bytes = fresh.ok() ? fresh->size() : 0;
    const std::lock_guard<std::mutex> lock(mutex_);
    if (bytes <= kept_bytes_left_) {
      kept_bytes_left_ -= bytes;
      space = &converted_.emplace(location, std::move(fresh)).first->second;
    } else {
      space = &fresh;
    }
  }
  if (!space->ok()) return space->status();
  // Every line of a converted trace, whatever `keep_line` says, as its readers have always had them (the pod trace's
  // window in ms starts at a trace's first event on any of its lines).
  return xspace::read_xspace_planes(**space, location, on_plane, header);
}

}  // namespace podscope::run_directory
