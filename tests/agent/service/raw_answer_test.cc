// Raw answers through a real gRPC server on loopback, answering tensorflow.ProfilerService/Profile raw as the
// agent's services do: the head's fields and the body, sent as built, reach a typed client as one response message
// (a small body and one past kReturnHeapAfterBytes); past AnswerThreads' bound a call is refused at once and counted,
// and the bound is free again once answers finish; a request that does not parse is refused naming its type.
#include "agent/service/raw_answer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <prometheus/registry.h>

#include "agent/service/agent_metrics.h"
#include "tensorflow/profiler_service.grpc.pb.h"
#include "tensorflow/xplane.pb.h"
#include "tests/daemon/grpc_server_fixtures.h"

namespace podscope::agent {
namespace {

using ::testing::HasSubstr;

constexpr int kMaxAnswers = 2;
constexpr char kHold[] = "hold";  // a session id whose answer waits for release()

// Profile answered raw: empty_trace in the head, then as the body an XSpace naming the session, with one warning of
// duration_ms bytes.
class RawProfilerService final
    : public tensorflow::ProfilerService::WithRawCallbackMethod_Profile<tensorflow::ProfilerService::Service> {
 public:
  explicit RawProfilerService(RequestMetrics& metrics)
      : metrics_(metrics), threads_(kMaxAnswers, metrics.answers_refused), released_(release_.get_future().share()) {}

  grpc::ServerUnaryReactor* Profile(grpc::CallbackServerContext* context, const grpc::ByteBuffer* request,
                                    grpc::ByteBuffer* response) override {
    tensorflow::ProfileRequest parsed;
    const grpc::Status ready = parse_request(*request, parsed);
    return threads_.run(context, ready, [this, response, parsed = std::move(parsed)] {
      if (parsed.session_id() == kHold) {
        ++held_;
        released_.wait();
      }
      tensorflow::ProfileResponse fields;
      fields.set_empty_trace(true);
      std::string head = fields.SerializeAsString();
      tensorflow::profiler::XSpace space;
      space.add_hostnames(parsed.session_id());
      space.add_warnings(std::string(parsed.duration_ms(), 'w'));
      std::string body = space.SerializeAsString();
      append_field_prefix(tensorflow::ProfileResponse::kXspaceFieldNumber, body.size(), head);
      *response = raw_answer(std::move(head), std::move(body), metrics_.heap_returned);
      return grpc::Status::OK;
    });
  }

  int held() const { return held_; }
  void release() {
    if (!released_.valid() || released_.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      release_.set_value();
    }
  }

 private:
  RequestMetrics& metrics_;
  AnswerThreads threads_;
  std::promise<void> release_;
  std::shared_future<void> released_;
  std::atomic<int> held_{0};
};

class RawAnswerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials());
  }
  void TearDown() override {
    service_.release();
    server_->Shutdown();
  }

  grpc::Status profile(const std::string& session, uint64_t body_bytes, tensorflow::ProfileResponse& response) {
    tensorflow::ProfileRequest request;
    request.set_session_id(session);
    request.set_duration_ms(body_bytes);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    return tensorflow::ProfilerService::NewStub(channel_)->Profile(&context, request, &response);
  }
  double refused() { return podscope::testing::metric_value(registry_, "podscope_answers_refused_total"); }

  prometheus::Registry registry_;
  RequestMetrics metrics_{registry_, "h"};
  RawProfilerService service_{metrics_};
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
  int port_ = 0;
};

TEST_F(RawAnswerTest, TheHeadsFieldsAndTheBodyArriveAsOneResponse) {
  for (uint64_t bytes : {uint64_t{10}, uint64_t{3} * kReturnHeapAfterBytes}) {
    tensorflow::ProfileResponse response;
    const grpc::Status status = profile("s", bytes, response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_TRUE(response.empty_trace());
    ASSERT_EQ(response.xspace().hostnames_size(), 1);
    EXPECT_EQ(response.xspace().hostnames(0), "s");
    ASSERT_EQ(response.xspace().warnings_size(), 1);
    EXPECT_EQ(response.xspace().warnings(0), std::string(bytes, 'w'));
  }
}

TEST_F(RawAnswerTest, PastTheBoundACallIsRefusedAtOnceAndCountedUntilAnswersFinish) {
  std::vector<std::future<grpc::Status>> held;
  for (int i = 0; i < kMaxAnswers; ++i) {
    held.push_back(std::async(std::launch::async, [this] {
      tensorflow::ProfileResponse response;
      return profile(kHold, 1, response);
    }));
  }
  for (int wait = 0; wait < 2000 && service_.held() < kMaxAnswers; ++wait) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(service_.held(), kMaxAnswers);

  tensorflow::ProfileResponse response;
  const grpc::Status refused_call = profile("s", 1, response);
  EXPECT_EQ(refused_call.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused_call.error_message(), HasSubstr("2 captures and recorded windows are already being answered"));
  EXPECT_EQ(refused(), 1);

  service_.release();
  for (auto& call : held) EXPECT_TRUE(call.get().ok());
  EXPECT_TRUE(profile("s", 1, response).ok()) << "the answers that finished left the bound";
  EXPECT_EQ(refused(), 1);
}

TEST_F(RawAnswerTest, ARequestThatDoesNotParseIsRefusedNamingItsType) {
  grpc::GenericStub stub(channel_);
  const std::string truncated =
      "\x32\x05"
      "ab";  // session_id said to be 5 bytes long, 2 there
  grpc::Slice slice(truncated);
  const grpc::ByteBuffer request(&slice, 1);
  grpc::ByteBuffer response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/tensorflow.ProfilerService/Profile", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  const grpc::Status status = done.get_future().get();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("did not parse as tensorflow.ProfileRequest"));
  EXPECT_EQ(refused(), 0) << "refused before it took a thread";
}

}  // namespace
}  // namespace podscope::agent
