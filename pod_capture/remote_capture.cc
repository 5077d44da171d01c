#include "pod_capture/remote_capture.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>

#include "daemon/grpc_status.h"
#include "daemon/path_within_root.h"
#include "pod_capture/pod_run.h"
#include "daemon/unique_directory.h"
#include "pod_capture/run_directory.h"

namespace podscope::pod_capture {
namespace {

// A file being received: appended to a temp file, renamed into place on its last chunk.
struct IncomingFile {
  std::filesystem::path temp;
  std::ofstream out;
  uint64_t size = 0;
};

// Writes the streamed run into the run directory the first summary names; the last summary has the outcome.
class RunReceiver {
 public:
  RunReceiver(std::string coordinator_address, std::filesystem::path logdir)
      : coordinator_address_(std::move(coordinator_address)), logdir_(std::move(logdir)) {}
  ~RunReceiver() { discard_unfinished(); }

  absl::Status on_summary(const podscope::v1::CaptureChunk::Summary& summary) {
    outcome_.exit_code = summary.exit_code();
    outcome_.summary_text = summary.text();
    if (have_summary_) return absl::OkStatus();  // the closing summary: same run, now with its text
    have_summary_ = true;
    // A run of the same name already in the logdir (the same second, a reused session id) is never overwritten.
    const std::filesystem::path wanted = run_directory(logdir_, summary.run_name());
    absl::StatusOr<std::filesystem::path> claimed = create_unique_directory(wanted.parent_path(), wanted.filename());
    if (!claimed.ok()) return claimed.status();
    outcome_.run_dir = *claimed;
    return absl::OkStatus();
  }

  absl::Status on_file(const podscope::v1::CaptureChunk::FileChunk& piece) {
    if (!have_summary_) {
      return absl::InternalError("coordinator " + coordinator_address_ + " sent a file before the run name");
    }
    // The coordinator streams the files of one directory: anything but a plain name would leave the run.
    if (!is_plain_path_component(piece.relative_path())) {
      return absl::InvalidArgumentError("coordinator " + coordinator_address_ + " sent an unsafe file name \"" +
                                        piece.relative_path() + "\"");
    }
    auto [it, inserted] = files_.try_emplace(piece.relative_path());
    IncomingFile& file = it->second;
    const auto target = outcome_.run_dir / piece.relative_path();
    if (inserted) {
      file.temp = target.string() + ".tmp." + std::to_string(getpid());
      file.out.open(file.temp, std::ios::binary | std::ios::trunc);
      if (!file.out) return absl::InternalError("cannot create " + file.temp.string());
    }
    if (piece.offset() != file.size) {
      return absl::InternalError("coordinator sent " + piece.relative_path() + " out of order (offset " +
                                 std::to_string(piece.offset()) + ", expected " + std::to_string(file.size) + ")");
    }
    file.out.write(piece.data().data(), static_cast<std::streamsize>(piece.data().size()));
    if (!file.out) return absl::InternalError("cannot write " + file.temp.string() + ": " + std::strerror(errno));
    file.size += piece.data().size();
    if (piece.last()) {
      file.out.close();
      if (!file.out) return absl::InternalError("cannot write " + file.temp.string() + ": " + std::strerror(errno));
      std::error_code ec;
      std::filesystem::rename(file.temp, target, ec);
      if (ec) return absl::InternalError("cannot rename " + file.temp.string() + ": " + ec.message());
    }
    return absl::OkStatus();
  }

  // Removes the temp files of files whose last chunk never came.
  void discard_unfinished() {
    for (auto& [name, file] : files_) {
      if (!file.out.is_open()) continue;
      file.out.close();
      std::error_code ec;
      std::filesystem::remove(file.temp, ec);
    }
  }

  // A run received in part would pass for a smaller whole one: its copy goes (the coordinator keeps the run in its
  // own logdir). Returns what the caller is told.
  std::string discard_run() {
    discard_unfinished();
    if (outcome_.run_dir.empty()) return "";
    std::error_code ignored;
    std::filesystem::remove_all(outcome_.run_dir, ignored);
    return " (the partial copy " + outcome_.run_dir.string() + " was removed)";
  }

  bool have_summary() const { return have_summary_; }
  const RemoteCaptureOutcome& outcome() const { return outcome_; }

 private:
  std::string coordinator_address_;
  std::filesystem::path logdir_;
  RemoteCaptureOutcome outcome_;
  bool have_summary_ = false;
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
