// Large answers sent as the bytes they were built as. A capture or a recorder window is built serialized; parsing it
// back into a response message for gRPC to serialize again would hold it three times (bytes, objects, gRPC's copy).
// Instead the response's other fields are written as a head and the built bytes follow as the value of one
// length-delimited field, handed to gRPC without a copy. When gRPC lets go of them (sent, or the call gone) they are
// freed and, for a large answer, the heap is handed back to the system: glibc would keep the answer's peak.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>
#include <prometheus/counter.h>

namespace podscope::agent {

// The threads each service answers on at most (as many as gRPC's own, half of them).
inline constexpr int kMaxAnswerThreads = 32;
// Answers at least this large hand the heap back once sent.
inline constexpr size_t kReturnHeapAfterBytes = size_t{1} << 20;

// Appends the tag of length-delimited field `field_number` and a value size of `size` bytes.
void append_field_prefix(int field_number, size_t size, std::string& out);

// The serialized response `head`, then `body` sent as it is: `head` must end with the prefix of the field `body` is
// the value of (append_field_prefix). Bytes handed back to the system after a large answer add to `heap_returned`.
grpc::ByteBuffer raw_answer(std::string head, std::string body, prometheus::Counter& heap_returned);

// The threads that large answers are built on: a capture, or a snapshot waiting for the builds before it, takes
// seconds, which must not hold one of gRPC's callback threads. Bounded as gRPC's own threads are: past `max` in
// flight a call is refused RESOURCE_EXHAUSTED and counted.
class AnswerThreads {
 public:
  AnswerThreads(int max, prometheus::Counter& refused) : max_(max), refused_(refused) {}
  // Runs `answer` on a thread of its own and finishes the call with its status; a call whose checks failed
  // (`ready`: its caller's authorization, its request's parse) is finished with that status at once.
  grpc::ServerUnaryReactor* run(grpc::CallbackServerContext* context, const grpc::Status& ready,
                                std::function<grpc::Status()> answer);

 private:
  const int max_;
  prometheus::Counter& refused_;
  std::atomic<int> in_flight_{0};
};

// A raw request parsed as `message`; INVALID_ARGUMENT when it does not parse.
grpc::Status parse_request(const grpc::ByteBuffer& request, google::protobuf::Message& message);

}  // namespace podscope::agent
