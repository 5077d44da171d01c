#include "agent/service/raw_answer.h"

#include <thread>
#include <utility>
#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "daemon/heap.h"

namespace podscope::agent {
namespace {

// The body gRPC holds: freed when gRPC lets go of its slice.
struct HeldBody {
  std::string bytes;
  prometheus::Counter* heap_returned;
};

void release_body(void* held) {
  auto* body = static_cast<HeldBody*>(held);
  const bool large = body->bytes.size() >= kReturnHeapAfterBytes;
  prometheus::Counter* heap_returned = body->heap_returned;
  delete body;
  if (large) heap_returned->Increment(static_cast<double>(return_free_heap()));
}

}  // namespace

void append_field_prefix(int field_number, size_t size, std::string& out) {
  using google::protobuf::internal::WireFormatLite;
  using google::protobuf::io::CodedOutputStream;
  uint8_t prefix[16];
  uint8_t* end = CodedOutputStream::WriteTagToArray(
      WireFormatLite::MakeTag(field_number, WireFormatLite::WIRETYPE_LENGTH_DELIMITED), prefix);
  end = CodedOutputStream::WriteVarint64ToArray(size, end);
  out.append(reinterpret_cast<const char*>(prefix), static_cast<size_t>(end - prefix));
}

grpc::ByteBuffer raw_answer(std::string head, std::string body, prometheus::Counter& heap_returned) {
  std::vector<grpc::Slice> slices;
  slices.emplace_back(head);
  if (!body.empty()) {
    auto* held = new HeldBody{std::move(body), &heap_returned};
    slices.emplace_back(held->bytes.data(), held->bytes.size(), release_body, held);
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

grpc::ServerUnaryReactor* AnswerThreads::run(grpc::CallbackServerContext* context, const grpc::Status& ready,
                                             std::function<grpc::Status()> answer) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!ready.ok()) {
    reactor->Finish(ready);
    return reactor;
  }
  if (in_flight_.fetch_add(1) >= max_) {
    in_flight_.fetch_sub(1);
    refused_.Increment();
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 std::to_string(max_) + " captures and recorded windows are already being answered; "
                                                        "try again later"));
    return reactor;
  }
  // The thread touches nothing after Finish: the server's shutdown waits for the call to finish, not for the thread.
  std::thread([this, reactor, answer = std::move(answer)] {
    grpc::Status status = answer();
    in_flight_.fetch_sub(1);
    reactor->Finish(std::move(status));
  }).detach();
  return reactor;
}

grpc::Status parse_request(const grpc::ByteBuffer& request, google::protobuf::Message& message) {
  grpc::ByteBuffer copy(request);  // shares the slices
  if (grpc::SerializationTraits<google::protobuf::Message>::Deserialize(&copy, &message).ok()) {
    return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      "the request did not parse as " + std::string(message.GetTypeName()));
}

}  // namespace podscope::agent
