// One Profile call to a framework profiler server (tensorflow.ProfilerService/Profile over plaintext HTTP/2, as TF
// and JAX serve it), spoken with libcurl so that the answer is bounded while it arrives: gRPC's own client (1.51)
// reads a whole message before it checks it against the channel's largest (an answer of 400 MiB to a channel taking
// at most 128 MiB grew the agent by 404 MiB before it was refused). Here the message's length, the first 5 bytes of
// the answer, is checked first, and an answer longer than the caller allows is cut off there. The wire is gRPC's
// (PROTOCOL-HTTP2): a length-prefixed request, the length-prefixed answer, grpc-status and grpc-message in the
// trailers (or, for an error without an answer, in the headers).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <string>

#include "tensorflow/profiler_service.pb.h"

namespace podscope::agent {

struct UpstreamAnswer {
  enum class Outcome {
    kAnswered,  // `bytes` hold the serialized ProfileResponse
    kTooLarge,  // its length (`declared_bytes`) was more than allowed: nothing of it was read
    kFailed,    // `error` says why (the server's grpc-status and message, or the transport's)
  };
  Outcome outcome = Outcome::kFailed;
  std::string bytes;
  size_t declared_bytes = 0;
  std::string error;
};

// Calls Profile on `address` (host:port), waiting until `deadline` at most, or until `cancelled` is set (checked
// several times a second). An answer of more than `max_answer_bytes` is not read.
UpstreamAnswer call_upstream_profile(const std::string& address, const tensorflow::ProfileRequest& request,
                                     size_t max_answer_bytes, std::chrono::system_clock::time_point deadline,
                                     const std::atomic<bool>& cancelled);

}  // namespace podscope::agent
