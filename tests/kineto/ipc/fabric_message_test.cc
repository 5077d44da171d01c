#include "kineto/ipc/fabric_message.h"

#include <string>
#include <variant>

#include <gtest/gtest.h>

namespace podscope::kineto::ipc {
namespace {

std::string from_hex(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

// A poll as PyTorch 2.13's Kineto sent it (CPU build, KINETO_USE_DAEMON=1): payload 36 bytes, type "req",
// config type 3 (events | activities), 5 pids (the process, its parent, ...), job id 0.
std::string recorded_torch_poll() {
  std::string header = from_hex("2400000000000000");  // size 36
  std::string type(kTypeBytes, '\0');
  type.replace(0, 3, "req");
  return header + type + from_hex("03000000050000000000000000000000d11700005617000055170000486e0000436e0000");
}

Decoded decode(const std::string& bytes) { return decode_message(bytes, bytes.size()); }

TEST(FabricMessage, HeaderAndPayloadSizesAreKinetos) {
  EXPECT_EQ(kHeaderBytes, 40u);
  EXPECT_EQ(kPollFixedBytes, 16u);
  EXPECT_EQ(kRegistrationBytes, 16u);
  EXPECT_EQ(recorded_torch_poll().size(), 76u);
}

TEST(FabricMessage, DecodesARecordedTorchPoll) {
  const Decoded d = decode(recorded_torch_poll());
  ASSERT_TRUE(std::holds_alternative<Poll>(d));
  const Poll& poll = std::get<Poll>(d);
  EXPECT_EQ(poll.config_type, 3);
  EXPECT_EQ(poll.job_id, 0);
  EXPECT_EQ(poll.pids, (std::vector<int32_t>{6097, 5974, 5973, 28232, 28227}));
}

TEST(FabricMessage, EncodesAPollAsKinetoDoes) {
  Poll poll{3, 0, {6097, 5974, 5973, 28232, 28227}};
  EXPECT_EQ(encode_poll(poll), recorded_torch_poll());
}

TEST(FabricMessage, RegistrationRoundTrips) {
  const std::string bytes = encode_registration({2, 4242, int64_t{1} << 40});
  ASSERT_EQ(bytes.size(), kHeaderBytes + kRegistrationBytes);
  EXPECT_EQ(bytes.substr(8, 5), std::string("ctxt\0", 5));
  const Decoded d = decode(bytes);
  ASSERT_TRUE(std::holds_alternative<Registration>(d));
  EXPECT_EQ(std::get<Registration>(d).gpu, 2);
  EXPECT_EQ(std::get<Registration>(d).pid, 4242);
  EXPECT_EQ(std::get<Registration>(d).job_id, int64_t{1} << 40);
}

TEST(FabricMessage, AnswersCarryTheirTypeAndPayload) {
  const std::string config = "PROFILE_START_TIME=1\n";
  const std::string answer = encode_poll_answer(config);
  EXPECT_EQ(answer.substr(0, 8), from_hex("1500000000000000"));
  EXPECT_EQ(answer.substr(8, 4), std::string("req\0", 4));
  EXPECT_EQ(answer.substr(kHeaderBytes), config);
  EXPECT_EQ(encode_poll_answer("").size(), kHeaderBytes);
  const std::string registered = encode_registration_answer(3);
  EXPECT_EQ(registered.substr(0, 8), from_hex("0400000000000000"));
  EXPECT_EQ(registered.substr(kHeaderBytes), from_hex("03000000"));
}

Refusal refusal_of(const std::string& bytes, size_t length) {
  const Decoded d = decode_message(bytes, length);
  EXPECT_TRUE(std::holds_alternative<Refusal>(d));
  return std::holds_alternative<Refusal>(d) ? std::get<Refusal>(d) : Refusal::kShort;
}

TEST(FabricMessage, RefusesShortDatagrams) {
  const std::string poll = recorded_torch_poll();
  EXPECT_EQ(refusal_of("", 0), Refusal::kShort);
  EXPECT_EQ(refusal_of(poll.substr(0, 39), 39), Refusal::kShort);
  // A header that announces a payload shorter than a poll's fixed part.
  std::string stub = encode_message(kPollType, "abc");
  EXPECT_EQ(refusal_of(stub, stub.size()), Refusal::kShort);
  std::string reg = encode_message(kRegistrationType, std::string(8, '\0'));
  EXPECT_EQ(refusal_of(reg, reg.size()), Refusal::kShort);
}

TEST(FabricMessage, RefusesOversizedDatagrams) {
  const std::string big(kMaxMessageBytes + 1, 'x');
  EXPECT_EQ(refusal_of(big, big.size()), Refusal::kOversized);
  // Cut by the read buffer: the full length says so.
  EXPECT_EQ(refusal_of(recorded_torch_poll(), 1 << 20), Refusal::kOversized);
}

TEST(FabricMessage, RefusesASizeThatIsNotThePayloads) {
  std::string poll = recorded_torch_poll();
  poll[0] = 37;
  EXPECT_EQ(refusal_of(poll, poll.size()), Refusal::kSizeMismatch);
  std::string huge = recorded_torch_poll();
  huge[7] = '\x7f';  // 2^62-ish: must not be trusted for anything
  EXPECT_EQ(refusal_of(huge, huge.size()), Refusal::kSizeMismatch);
  std::string reg = encode_message(kRegistrationType, std::string(20, '\1'));
  EXPECT_EQ(refusal_of(reg, reg.size()), Refusal::kSizeMismatch);
}

TEST(FabricMessage, RefusesUnknownTypes) {
  for (std::string_view type : {"request", "re", "", "ctx", "REQ"}) {
    const std::string m = encode_message(type, std::string(16, '\0'));
    EXPECT_EQ(refusal_of(m, m.size()), Refusal::kUnknownType) << type;
  }
  // A type field without its terminating NUL.
  std::string m = recorded_torch_poll();
  for (size_t i = 8; i < kHeaderBytes; ++i) m[i] = 'r';
  EXPECT_EQ(refusal_of(m, m.size()), Refusal::kUnknownType);
}

TEST(FabricMessage, RefusesBadPidLists) {
  auto poll_with = [](int32_t n, const std::vector<int32_t>& pids) {
    Poll p{2, 0, pids};
    std::string bytes = encode_poll(p);
    // Overwrite n.
    for (int i = 0; i < 4; ++i)
      bytes[kHeaderBytes + 4 + i] = static_cast<char>((static_cast<uint32_t>(n) >> (8 * i)) & 0xff);
    return bytes;
  };
  EXPECT_EQ(refusal_of(poll_with(0, {}), kHeaderBytes + 16), Refusal::kBadPids);
  EXPECT_EQ(refusal_of(poll_with(-1, {1}), kHeaderBytes + 20), Refusal::kBadPids);
  EXPECT_EQ(refusal_of(poll_with(3, {1, 2}), kHeaderBytes + 24), Refusal::kBadPids);
  EXPECT_EQ(refusal_of(poll_with(kMaxPollPids + 1, {1}), kHeaderBytes + 20), Refusal::kBadPids);
  EXPECT_EQ(refusal_of(poll_with(2, {5, 0}), kHeaderBytes + 24), Refusal::kBadPids);
  EXPECT_EQ(refusal_of(poll_with(1, {-7}), kHeaderBytes + 20), Refusal::kBadPids);
  // The longest accepted chain.
  std::vector<int32_t> chain(kMaxPollPids, 9);
  const std::string longest = encode_poll({2, 0, chain});
  EXPECT_EQ(longest.size(), kMaxMessageBytes);
  EXPECT_TRUE(std::holds_alternative<Poll>(decode(longest)));
}

TEST(FabricMessage, EveryRefusalHasAName) {
  for (Refusal r : kRefusals) EXPECT_NE(refusal_name(r), "unknown");
}

}  // namespace
}  // namespace podscope::kineto::ipc
