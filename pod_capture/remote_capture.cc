#include "pod_capture/remote_capture.h"

#include <chrono>
#include <map>
#include <optional>

#include "daemon/grpc_status.h"
#include "daemon/path_within_root.h"
#include "pod_capture/pod_run.h"
#include "run_directory/run_directory.h"
#include "storage/location.h"

namespace podscope::pod_capture {
namespace {

// Writes the streamed run into a run of the CLI's logdir named as the first summary names it; the last summary has
// the outcome.
class RunReceiver {
 public:
  RunReceiver(std::string coordinator_address, std::filesystem::path logdir)
      : coordinator_address_(std::move(coordinator_address)), logdir_(std::move(logdir)) {}

  absl::Status on_summary(const podscope::v1::CaptureChunk::Summary& summary) {
    outcome_.exit_code = summary.exit_code();
    outcome_.summary_text = summary.text();
    if (run_ || !outcome_.run_location.empty()) return absl::OkStatus();  // the closing summary, with its text
    if (storage::is_bucket_url(logdir_.string())) {
      // The coordinator wrote the run into the bucket: nothing comes here but its name.
      std::string root = logdir_.string();
      while (root.ends_with('/')) root.pop_back();
      outcome_.run_location = root + "/plugins/profile/" + summary.run_name();
      return absl::OkStatus();
    }
    absl::StatusOr<run_directory::RunDirectory> claimed =
        run_directory::RunDirectory::in_logdir(logdir_, summary.run_name()).claim();
    if (!claimed.ok()) return claimed.status();
    run_ = *claimed;
    outcome_.run_dir = run_->local_path();
    outcome_.run_location = run_->location();
    return absl::OkStatus();
  }

  absl::Status on_file(const podscope::v1::CaptureChunk::FileChunk& piece) {
    if (!run_) return absl::InternalError("coordinator " + coordinator_address_ + " sent a file before the run name");
    // The coordinator streams the files of one directory: anything but a plain name would leave the run.
    if (!is_plain_path_component(piece.relative_path())) {
      return absl::InvalidArgumentError("coordinator " + coordinator_address_ + " sent an unsafe file name \"" +
                                        piece.relative_path() + "\"");
    }
    auto [it, inserted] = files_.try_emplace(piece.relative_path());
    IncomingFile& file = it->second;
    if (inserted) {
      if (absl::Status s =
              run_->open_streamed(piece.relative_path(), run_directory::StreamedFile::Compression::kNone, file.out);
          !s.ok()) {
        return s;
      }
    }
    if (piece.offset() != file.out.bytes_written()) {
      return absl::InternalError("coordinator sent " + piece.relative_path() + " out of order (offset " +
                                 std::to_string(piece.offset()) + ", expected " +
                                 std::to_string(file.out.bytes_written()) + ")");
    }
    file.out.write(piece.data());
    if (!file.out.status().ok()) return file.out.status();
    if (piece.last()) return file.out.commit();
    return absl::OkStatus();
  }

  // A run received in part would pass for a smaller whole one: its copy goes (the coordinator keeps the run in its
  // own logdir), with the files whose last chunk never came. Returns what the caller is told.
  std::string discard_run() {
    files_.clear();
    if (!run_) return "";
    run_->remove_all();
    return " (the partial copy " + run_->location() + " was removed)";
  }

  bool have_summary() const { return run_.has_value() || !outcome_.run_location.empty(); }
  const RemoteCaptureOutcome& outcome() const { return outcome_; }

 private:
  // A file being received: streamed into the run, published on its last chunk.
  struct IncomingFile {
    run_directory::StreamedFile out;
  };

  std::string coordinator_address_;
  std::filesystem::path logdir_;
  RemoteCaptureOutcome outcome_;
  std::optional<run_directory::RunDirectory> run_;
  std::map<std::string, IncomingFile> files_;
};

// The whole stream may take every attempt: per attempt the delay, the capture's own deadline (answer_wait_ms) and
// its two clock-sync bursts; then once the time to write, analyse and send the run.
std::chrono::system_clock::time_point stream_deadline(const podscope::v1::CaptureRequest& request) {
  // Only the spec's duration, delay and attempts matter here, not its run name.
  const CaptureSpec spec = capture_spec_from(request, /*session_id=*/"", /*now_ns=*/0);
  const int64_t per_attempt_ms = spec.delay_ms + answer_wait_ms(spec.duration_ms) + 2'000;
  return std::chrono::system_clock::now() +
         std::chrono::milliseconds(spec.num_tracing_attempts * per_attempt_ms + 60'000);
}

// Hands each chunk to the receiver (progress lines to `progress`) until the stream ends or a chunk is refused.
absl::Status receive_run(grpc::ClientReader<podscope::v1::CaptureChunk>& reader, RunReceiver& receiver,
                         const ProgressFn& progress) {
  podscope::v1::CaptureChunk chunk;
  while (reader.Read(&chunk)) {
    absl::Status taken = absl::OkStatus();
    switch (chunk.kind_case()) {
      case podscope::v1::CaptureChunk::kProgress: progress(chunk.progress()); break;
      case podscope::v1::CaptureChunk::kFile: taken = receiver.on_file(chunk.file()); break;
      case podscope::v1::CaptureChunk::kSummary:
        // The summary comes first (for the run name) and again last (with the outcome).
        taken = receiver.on_summary(chunk.summary());
        break;
      case podscope::v1::CaptureChunk::KIND_NOT_SET: break;
    }
    if (!taken.ok()) return taken;
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RemoteCaptureOutcome> capture_through_coordinator(const std::string& coordinator_address,
                                                                 std::shared_ptr<grpc::ChannelCredentials> credentials,
                                                                 const podscope::v1::CaptureRequest& request,
                                                                 const std::filesystem::path& logdir,
                                                                 const ProgressFn& progress) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(coordinator_address, std::move(credentials), args);
  auto stub = podscope::v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(stream_deadline(request));
  auto reader = stub->Capture(&context, request);
  RunReceiver receiver(coordinator_address, logdir);
  if (absl::Status received = receive_run(*reader, receiver, progress); !received.ok()) {
    context.TryCancel();
    return absl::Status(received.code(), std::string(received.message()) + receiver.discard_run());
  }
  const grpc::Status status = reader->Finish();
  if (!status.ok()) return to_absl_status(status, "capture through coordinator " + coordinator_address + " failed");
  if (!receiver.have_summary()) return absl::InternalError("coordinator " + coordinator_address + " sent no summary");
  return receiver.outcome();
}

}  // namespace podscope::pod_capture
