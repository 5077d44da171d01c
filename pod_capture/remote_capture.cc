#include "pod_capture/remote_capture.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>

#include "pod_capture/run_directory.h"

namespace podscope::pod_capture {
namespace {

// A file being received: appended to a temp file, renamed into place on its last chunk.
struct IncomingFile {
  std::filesystem::path temp;
  std::ofstream out;
  uint64_t size = 0;
};

// Relative paths from the coordinator must stay inside the run directory.
bool is_safe_relative(const std::string& path) {
  if (path.empty() || path.front() == '/') return false;
  for (const auto& part : std::filesystem::path(path)) {
    if (part == ".." || part == ".") return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<RemoteCaptureOutcome> capture_through_coordinator(const std::string& coordinator_address,
                                                                 const podscope::v1::CaptureRequest& request,
                                                                 const std::filesystem::path& logdir,
                                                                 const ProgressFn& progress) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(coordinator_address, grpc::InsecureChannelCredentials(), args);
  auto stub = podscope::v1::Coordinator::NewStub(channel);
  grpc::ClientContext context;
  const int64_t attempts = std::max(1, request.num_tracing_attempts());
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(attempts * (std::max<int64_t>(60'000, 2 * request.duration_ms()) +
                                                             static_cast<int64_t>(request.delay_ms()) + 10'000)));
  auto reader = stub->Capture(&context, request);
  podscope::v1::CaptureChunk chunk;
  RemoteCaptureOutcome outcome;
  bool have_summary = false;
  std::map<std::string, IncomingFile> files;
  while (reader->Read(&chunk)) {
    switch (chunk.kind_case()) {
      case podscope::v1::CaptureChunk::kProgress:
        progress(chunk.progress());
        break;
      case podscope::v1::CaptureChunk::kFile: {
        const auto& piece = chunk.file();
        if (!have_summary) {
          context.TryCancel();
          return absl::InternalError("coordinator " + coordinator_address + " sent a file before the run name");
        }
        if (!is_safe_relative(piece.relative_path())) {
          context.TryCancel();
          return absl::InvalidArgumentError("coordinator " + coordinator_address + " sent an unsafe file name \"" +
                                            piece.relative_path() + "\"");
        }
        auto [it, inserted] = files.try_emplace(piece.relative_path());
        IncomingFile& file = it->second;
        if (inserted) {
          const auto target = outcome.run_dir / piece.relative_path();
          std::filesystem::create_directories(target.parent_path());
          file.temp = target.string() + ".tmp." + std::to_string(getpid());
          file.out.open(file.temp, std::ios::binary | std::ios::trunc);
          if (!file.out) return absl::InternalError("cannot create " + file.temp.string());
        }
        if (piece.offset() != file.size) {
          context.TryCancel();
          return absl::InternalError("coordinator sent " + piece.relative_path() + " out of order (offset " +
                                     std::to_string(piece.offset()) + ", expected " + std::to_string(file.size) + ")");
        }
        file.out.write(piece.data().data(), static_cast<std::streamsize>(piece.data().size()));
        file.size += piece.data().size();
        if (piece.last()) {
          file.out.close();
          if (!file.out) return absl::InternalError("cannot write " + file.temp.string());
          std::filesystem::rename(file.temp, outcome.run_dir / piece.relative_path());
        }
        break;
      }
      case podscope::v1::CaptureChunk::kSummary:
        // The summary comes first (for the run name) and again last (with the outcome).
        have_summary = true;
        outcome.run_dir = run_directory(logdir, chunk.summary().run_name());
        std::filesystem::create_directories(outcome.run_dir);
        outcome.exit_code = chunk.summary().exit_code();
        outcome.summary_text = chunk.summary().text();
        break;
      case podscope::v1::CaptureChunk::KIND_NOT_SET:
        break;
    }
  }
  const grpc::Status status = reader->Finish();
  for (auto& [name, file] : files) {
    if (file.out.is_open()) {
      file.out.close();
      std::filesystem::remove(file.temp);
    }
  }
  if (!status.ok()) {
    return absl::UnavailableError("capture through coordinator " + coordinator_address + " failed: " +
                                  status.error_message());
  }
  if (!have_summary) return absl::InternalError("coordinator " + coordinator_address + " sent no summary");
  return outcome;
}

}  // namespace podscope::pod_capture
