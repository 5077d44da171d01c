// The local frame codec: every message survives encode → decode, malformed input (truncation, bad magic,
// oversized lengths, hostile counts, unknown kinds and stage categories, trailing bytes, empty version ranges)
// is an error naming the problem, a frame type is known only from the version that adds it, and negotiation
// picks the newest version both ranges hold.
#include "proto/local/frame_codec.h"

#include <gtest/gtest.h>

namespace podscope::local {
namespace {

Message round_trip(const Message& in) {
  std::string frame;
  encode_frame(in, frame);
  std::string error;
  auto header = decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), kProtocolVersion, error);
  EXPECT_TRUE(header) << error;
  EXPECT_EQ(header->payload_bytes, frame.size() - kFrameHeaderBytes);
  auto out = decode_payload(header->type, std::string_view(frame).substr(kFrameHeaderBytes), error);
  EXPECT_TRUE(out) << error;
  return *out;
}

TEST(FrameCodec, RegisterRoundTrips) {
  RegisterMsg m{kProtocolVersion, 4242, "ring_trainer", "job-a", {3, 7}};
  auto out = std::get<RegisterMsg>(round_trip(m));
  EXPECT_EQ(out.pid, 4242);
  EXPECT_EQ(out.program, "ring_trainer");
  EXPECT_EQ(out.job, "job-a");
  EXPECT_EQ(out.cores, (std::vector<int32_t>{3, 7}));
}

TEST(FrameCodec, DevicePlanesChunkRoundTripsAndBadOffsetsAreRefused) {
  DevicePlanesMsg m{12, 3'000'000, 2'000'000, std::string(1000, 'x')};
  auto out = std::get<DevicePlanesMsg>(round_trip(m));
  EXPECT_EQ(out.session, 12u);
  EXPECT_EQ(out.total_bytes, 3'000'000u);
  EXPECT_EQ(out.offset, 2'000'000u);
  EXPECT_EQ(out.chunk, std::string(1000, 'x'));

  auto refused = [](const DevicePlanesMsg& bad) {
    std::string frame, error;
    encode_frame(bad, frame);
    EXPECT_FALSE(decode_payload(FrameType::kDevicePlanes, std::string_view(frame).substr(kFrameHeaderBytes), error));
    return error;
  };
  EXPECT_EQ(refused({1, 10, 8, "abc"}), "device_planes: chunk of 3 bytes at offset 8 runs past total_bytes 10");
  EXPECT_NE(refused({1, kMaxDeviceSpaceBytes + 1, 0, "a"}).find("exceeds the maximum"), std::string::npos);
}

TEST(FrameCodec, StepsRoundTrip) {
  StepsMsg m{{{1, 10, 1'700'000'000'000'000'000, 1'700'000'000'005'000'000, 1'000'000, 2'000'000},
              {1, 11, 1'700'000'000'005'000'000, 1'700'000'000'010'000'000, 0, 0}}};
  EXPECT_EQ(std::get<StepsMsg>(round_trip(m)), m);
}

TEST(FrameCodec, EventsRoundTripWithNames) {
  EventsMsg m;
  m.session = 9;
  m.core = 2;
  m.thread_id = 777;
  m.names = {{5, "matmul"}, {6, "{0,1}"}};
  m.events = {{EventKind::kSend, 13, 3, 1'700'000'000'000'000'100, 2500, 65536, 0},
              {EventKind::kCompute, 5, 0, 1'700'000'000'000'000'200, 900, 1'000'000, 4096}};
  EXPECT_EQ(std::get<EventsMsg>(round_trip(m)), m);
}

TEST(FrameCodec, InputStagesRoundTripWithNamesCategoriesAndParents) {
  InputStagesMsg m;
  m.session = 4;
  m.core = 3;
  m.thread_id = 4242;
  m.names = {{7, "input_batch"}, {8, "read_batch"}};
  m.stages = {{7, InputStageCategory::kPreprocess, 1ull << 40 | 1, 0, 1'700'000'000'000'000'000, 9000},
              {8, InputStageCategory::kRead, 1ull << 40 | 2, 1ull << 40 | 1, 1'700'000'000'000'000'100, 5000},
              {8, InputStageCategory::kEnqueue, ~0ull, ~0ull - 1, -5, 0}};
  EXPECT_EQ(std::get<InputStagesMsg>(round_trip(m)), m);
  std::string frame;
  encode_frame(m, frame);
  EXPECT_EQ(frame.size(),
            kFrameHeaderBytes + 8 + 4 + 8 + 4 + (4 + 4 + 11) + (4 + 4 + 10) + 4 + 3 * kEncodedInputStageBytes);
}

TEST(FrameCodec, InputStagesWithAnUnknownCategoryNoIdOrANegativeDurationAreRefused) {
  auto refused = [](InputStageMsg stage, size_t byte = 0, char value = 0) {
    InputStagesMsg m;
    m.stages.push_back(stage);
    std::string frame, error;
    encode_frame(m, frame);
    std::string payload = frame.substr(kFrameHeaderBytes);
    if (byte != 0) payload[payload.size() - kEncodedInputStageBytes + byte] = value;
    EXPECT_FALSE(decode_payload(FrameType::kInputStages, payload, error));
    return error;
  };
  EXPECT_EQ(refused({1, InputStageCategory::kRead, 5, 0, 0, 10}, 4, 3), "input_stage.category: unknown category 3");
  EXPECT_EQ(refused({1, InputStageCategory::kRead, 0, 0, 0, 10}), "input_stage.stage_id: 0 is not a stage id");
  EXPECT_EQ(refused({1, InputStageCategory::kRead, 5, 0, 0, -1}), "input_stage.duration_ns: negative duration -1");
}

TEST(FrameCodec, AllocationsRoundTripWithAllocatorAndOpNames) {
  AllocationsMsg m;
  m.session = 9;
  m.core = 2;
  m.thread_id = 777;
  m.names = {{5, "GPU_0_bfc"}, {6, "matmul"}};
  m.allocations = {{AllocationOp::kAllocate, 5, 6, 0x7f00'0000'1000, 1 << 20, 1'700'000'000'000'000'000},
                   {AllocationOp::kFree, 5, 0, 0x7f00'0000'1000, 0, 1'700'000'000'000'000'500},
                   {AllocationOp::kAllocate, 5, 0, ~0ull, INT64_MAX, -3}};
  EXPECT_EQ(std::get<AllocationsMsg>(round_trip(m)), m);
  std::string frame;
  encode_frame(m, frame);
  EXPECT_EQ(frame.size(),
            kFrameHeaderBytes + 8 + 4 + 8 + 4 + (4 + 4 + 9) + (4 + 4 + 6) + 4 + 3 * kEncodedAllocationBytes);
}

TEST(FrameCodec, AllocationsWithAnUnknownOpNoAllocatorOrANegativeSizeAreRefused) {
  auto refused = [](AllocationMsg allocation, char op_byte = 0) {
    AllocationsMsg m;
    m.allocations.push_back(allocation);
    std::string frame, error;
    encode_frame(m, frame);
    std::string payload = frame.substr(kFrameHeaderBytes);
    if (op_byte != 0) payload[payload.size() - kEncodedAllocationBytes] = op_byte;
    EXPECT_FALSE(decode_payload(FrameType::kAllocations, payload, error));
    return error;
  };
  EXPECT_EQ(refused({AllocationOp::kAllocate, 1, 0, 0x1000, 64, 0}, 2), "allocation.op: unknown operation 2");
  EXPECT_EQ(refused({AllocationOp::kFree, 0, 0, 0x1000, 0, 0}), "allocation.allocator_id: 0 names no allocator");
  EXPECT_EQ(refused({AllocationOp::kAllocate, 1, 0, 0x1000, -1, 0}), "allocation.bytes: negative size -1");
}

TEST(FrameCodec, CaptureControlRoundTrips) {
  EXPECT_EQ(std::get<CaptureOpenMsg>(round_trip(CaptureOpenMsg{3, 100, 200})).end_ns, 200);
  EXPECT_EQ(std::get<CaptureCloseMsg>(round_trip(CaptureCloseMsg{3})).session, 3u);
  EXPECT_EQ(std::get<CaptureDoneMsg>(round_trip(CaptureDoneMsg{3, 17})).dropped_events, 17u);
  EXPECT_EQ(std::get<CaptureDoneMsg>(round_trip(CaptureDoneMsg{3, kMaxDroppedEvents})).dropped_events,
            kMaxDroppedEvents);
}

TEST(FrameCodec, ADroppedEventsCountNoWindowCouldReachIsMalformed) {
  std::string frame, error;
  encode_frame(CaptureDoneMsg{3, UINT64_MAX}, frame);
  EXPECT_FALSE(decode_payload(FrameType::kCaptureDone, std::string_view(frame).substr(kFrameHeaderBytes), error));
  EXPECT_NE(error.find("capture_done.dropped_events: 18446744073709551615"), std::string::npos) << error;
}

TEST(FrameCodec, NegotiationFramesRoundTrip) {
  const auto hello = std::get<HelloMsg>(round_trip(HelloMsg{}));
  EXPECT_EQ(hello.max_version, kProtocolVersion);
  EXPECT_EQ(hello.min_version, kOldestProtocolVersion);
  EXPECT_EQ(std::get<WelcomeMsg>(round_trip(WelcomeMsg{2})).version, 2u);
  const auto refused = std::get<RefusedMsg>(round_trip(RefusedMsg{1, 2, "it speaks 3..3"}));
  EXPECT_EQ(refused.min_version, 1u);
  EXPECT_EQ(refused.max_version, 2u);
  EXPECT_EQ(refused.reason, "it speaks 3..3");

  std::string frame, error;
  encode_frame(HelloMsg{2, 3}, frame);
  EXPECT_FALSE(decode_payload(FrameType::kHello, std::string_view(frame).substr(kFrameHeaderBytes), error));
  EXPECT_EQ(error, "hello: version range 3..2 is empty");
}

TEST(FrameCodec, CommonVersionIsTheNewestInBothRanges) {
  EXPECT_EQ(common_version(HelloMsg{2, 1}, 1, 2), 2u);
  EXPECT_EQ(common_version(HelloMsg{5, 1}, 1, 2), 2u);  // a newer client meets an older agent
  EXPECT_EQ(common_version(HelloMsg{2, 1}, 2, 4), 2u);  // an older client meets a newer agent
  EXPECT_EQ(common_version(HelloMsg{3, 3}, 1, 2), std::nullopt);
  EXPECT_EQ(common_version(HelloMsg{2, 1}, 3, 3), std::nullopt);
}

TEST(FrameCodec, ProfilerServerRoundTripsAndAPortOutOfRangeIsMalformed) {
  std::string frame;
  encode_frame(ProfilerServerMsg{6009}, frame);
  std::string error;
  auto header = decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), kProtocolVersion, error);
  ASSERT_TRUE(header) << error;
  EXPECT_EQ(header->type, FrameType::kProfilerServer);
  auto msg = decode_payload(header->type, std::string_view(frame).substr(kFrameHeaderBytes), error);
  ASSERT_TRUE(msg) << error;
  EXPECT_EQ(std::get<ProfilerServerMsg>(*msg).port, 6009u);
  for (const uint32_t port : {0u, 65536u}) {
    frame.clear();
    encode_frame(ProfilerServerMsg{port}, frame);
    EXPECT_FALSE(decode_payload(FrameType::kProfilerServer, std::string_view(frame).substr(kFrameHeaderBytes), error));
    EXPECT_EQ(error, "profiler_server.port: " + std::to_string(port) + " is no TCP port");
  }
}

TEST(FrameCodec, FrameTypesAreKnownFromTheVersionThatAddsThem) {
  EXPECT_EQ(kProtocolVersion, 5u);
  EXPECT_FALSE(version_has(4, FrameType::kProfilerServer));
  EXPECT_TRUE(version_has(5, FrameType::kProfilerServer));
  EXPECT_TRUE(version_has(1, FrameType::kRegister));
  EXPECT_TRUE(version_has(1, FrameType::kDevicePlanes));
  EXPECT_FALSE(version_has(1, FrameType::kHello));
  EXPECT_FALSE(version_has(1, FrameType::kWelcome));
  EXPECT_TRUE(version_has(2, FrameType::kHello));
  EXPECT_TRUE(version_has(2, FrameType::kCaptureOpen));
  EXPECT_TRUE(version_has(3, FrameType::kRefused));  // a later version keeps every earlier frame
  EXPECT_FALSE(version_has(2, FrameType::kInputStages));
  EXPECT_TRUE(version_has(3, FrameType::kInputStages));

  // A version-1 reader (today's agents) finds a Hello unknown, as before versions were negotiated.
  std::string frame, error;
  encode_frame(HelloMsg{}, frame);
  EXPECT_FALSE(decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), 1, error));
  EXPECT_EQ(error, "unknown frame type 6 in protocol version 1");
  EXPECT_TRUE(decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), 2, error)) << error;

  // A version-2 agent finds input stages unknown; a client never sends them to one.
  frame.clear();
  encode_frame(InputStagesMsg{}, frame);
  EXPECT_FALSE(decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), 2, error));
  EXPECT_EQ(error, "unknown frame type 7 in protocol version 2");
  EXPECT_TRUE(decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), 3, error)) << error;

  // A version-3 agent finds allocations unknown; a client drops them for one.
  frame.clear();
  encode_frame(AllocationsMsg{}, frame);
  EXPECT_FALSE(decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), 3, error));
  EXPECT_EQ(error, "unknown frame type 8 in protocol version 3");
  EXPECT_TRUE(decode_header(std::string_view(frame).substr(0, kFrameHeaderBytes), 4, error)) << error;
}

TEST(FrameCodec, RejectsBadHeaders) {
  std::string frame;
  encode_frame(CaptureCloseMsg{1}, frame);
  std::string error;
  std::string bad = frame;
  bad[6] = 'x';
  EXPECT_FALSE(decode_header(std::string_view(bad).substr(0, 8), kProtocolVersion, error));
  EXPECT_NE(error.find("magic"), std::string::npos);

  bad = frame;
  bad[4] = 99;  // type 99
  EXPECT_FALSE(decode_header(std::string_view(bad).substr(0, 8), kProtocolVersion, error));
  EXPECT_EQ(error, "unknown frame type 99 in protocol version " + std::to_string(kProtocolVersion));

  bad = frame;
  bad[3] = 0x7f;  // ~2 GB payload
  EXPECT_FALSE(decode_header(std::string_view(bad).substr(0, 8), kProtocolVersion, error));
  EXPECT_NE(error.find("exceeds the maximum"), std::string::npos);

  EXPECT_FALSE(decode_header("abc", kProtocolVersion, error));
  EXPECT_NE(error.find("truncated"), std::string::npos);
}

TEST(FrameCodec, RejectsMalformedPayloads) {
  std::string error;
  std::string frame;
  encode_frame(RegisterMsg{kProtocolVersion, 1, "p", "j", {0}}, frame);
  const std::string payload = frame.substr(kFrameHeaderBytes);
  // Truncated at every length: never a crash, always an error.
  for (size_t n = 0; n < payload.size(); ++n) {
    EXPECT_FALSE(decode_payload(FrameType::kRegister, std::string_view(payload).substr(0, n), error)) << n;
  }
  EXPECT_FALSE(decode_payload(FrameType::kRegister, payload + "zz", error));
  EXPECT_NE(error.find("trailing"), std::string::npos);

  // A count the frame cannot hold is rejected before anything is allocated.
  std::string hostile(4, '\xff');
  EXPECT_FALSE(decode_payload(FrameType::kSteps, hostile, error));
  EXPECT_NE(error.find("steps.count"), std::string::npos);

  EventsMsg m;
  m.events.push_back({EventKind::kSend, 1, 1, 0, 10, 10, 0});
  frame.clear();
  encode_frame(m, frame);
  std::string bad = frame.substr(kFrameHeaderBytes);
  bad[bad.size() - kEncodedEventBytes] = 42;  // event kind
  EXPECT_FALSE(decode_payload(FrameType::kEvents, bad, error));
  EXPECT_NE(error.find("unknown kind 42"), std::string::npos);

  // An input stage's kind is held by the agent, never sent as an event.
  bad[bad.size() - kEncodedEventBytes] = static_cast<char>(EventKind::kInputStage);
  EXPECT_FALSE(decode_payload(FrameType::kEvents, bad, error));
  EXPECT_EQ(error, "event.kind: unknown kind 9");
}

}  // namespace
}  // namespace podscope::local
