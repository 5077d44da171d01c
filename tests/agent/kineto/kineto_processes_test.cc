#include "agent/kineto/kineto_processes.h"

#include <gtest/gtest.h>

namespace podscope::agent {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

kineto::ipc::Poll poll_of(int32_t pid, int32_t config_type = 3) { return {config_type, 9, {pid, 100, 1}}; }

// A sender as the endpoint verified it: in the agent's pid namespace, its ancestors from /proc.
VerifiedSender sender_of(int32_t pid, uint32_t uid = 1000) { return {pid, pid, uid, {100, 1}}; }

std::string poll(KinetoProcesses& processes, int32_t pid, int64_t now, int32_t config_type = 3, uint32_t uid = 1000) {
  PollRefusal refused = PollRefusal::kNone;
  std::string answer = processes.on_poll(sender_of(pid, uid), poll_of(pid, config_type), now, refused);
  EXPECT_EQ(refused, PollRefusal::kNone);
  return answer;
}

TEST(KinetoProcesses, APollRecordsTheProcessItsAncestorsAndItsInterval) {
  KinetoProcesses processes;
  EXPECT_EQ(poll(processes, 42, 10 * kSecond), "");
  EXPECT_EQ(processes.longest_poll_interval_ns(10 * kSecond), KinetoProcesses::kDefaultPollIntervalNs);
  poll(processes, 42, 12 * kSecond);
  const std::vector<KinetoProcess> live = processes.live(12 * kSecond);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].pid, 42);
  EXPECT_EQ(live[0].job_id, 9);
  EXPECT_EQ(live[0].ancestors, (std::vector<int32_t>{100, 1}));
  EXPECT_EQ(live[0].first_poll_ns, 10 * kSecond);
  EXPECT_EQ(live[0].last_poll_ns, 12 * kSecond);
  EXPECT_EQ(live[0].poll_interval_ns, 2 * kSecond);
  EXPECT_EQ(processes.longest_poll_interval_ns(12 * kSecond), 2 * kSecond);
}

TEST(KinetoProcesses, AProcessSilentFor60SecondsIsForgotten) {
  KinetoProcesses processes;
  poll(processes, 1, 0);
  poll(processes, 2, 30 * kSecond);
  EXPECT_EQ(processes.live(60 * kSecond).size(), 2u);
  const std::vector<KinetoProcess> live = processes.live(60 * kSecond + 1);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].pid, 2);
  EXPECT_EQ(processes.longest_poll_interval_ns(91 * kSecond), 0);
  EXPECT_TRUE(processes.live(91 * kSecond).empty());
}

TEST(KinetoProcesses, ATraceRequestIsHandedOnceAtTheNextActivitiesPoll) {
  KinetoProcesses processes;
  poll(processes, 7, 0);
  EXPECT_EQ(processes.handoff(7), TraceHandoff::kUnknown);
  processes.request_trace(7, "CONFIG\n");
  EXPECT_EQ(processes.handoff(7), TraceHandoff::kWaiting);
  // A poll for event configs only does not take it.
  EXPECT_EQ(poll(processes, 7, 1, kineto::ipc::kEventsConfig), "");
  EXPECT_EQ(processes.handoff(7), TraceHandoff::kWaiting);
  EXPECT_EQ(poll(processes, 7, 2), "CONFIG\n");
  EXPECT_EQ(processes.handoff(7), TraceHandoff::kHanded);
  EXPECT_EQ(poll(processes, 7, 3), "");
  // Another process's poll does not take it either.
  processes.request_trace(8, "OTHER\n");
  EXPECT_EQ(poll(processes, 7, 4), "");
  processes.withdraw_all();
  EXPECT_EQ(poll(processes, 8, 5), "");
  EXPECT_EQ(processes.handoff(8), TraceHandoff::kUnknown);
}

TEST(KinetoProcesses, PollsBeyondTheCapAreAnsweredEmptyAndNotKept) {
  KinetoProcesses processes;
  // Every uid up to its own cap, until all places are taken.
  const int32_t per_uid = static_cast<int32_t>(KinetoProcesses::kMaxProcessesPerUid);
  for (int32_t pid = 1; pid <= static_cast<int32_t>(KinetoProcesses::kMaxProcesses); ++pid) {
    poll(processes, pid, 0, 3, static_cast<uint32_t>((pid - 1) / per_uid));
  }
  processes.request_trace(999'999, "X\n");
  PollRefusal refused = PollRefusal::kNone;
  EXPECT_EQ(processes.on_poll(sender_of(999'999, 5000), poll_of(999'999), 1, refused), "");
  EXPECT_EQ(refused, PollRefusal::kProcessCap);
  EXPECT_EQ(processes.live(1).size(), KinetoProcesses::kMaxProcesses);
  // Once the others fall silent, room is made.
  EXPECT_EQ(processes.on_poll(sender_of(999'999, 5000), poll_of(999'999), 61 * kSecond, refused), "X\n");
  EXPECT_EQ(refused, PollRefusal::kNone);
  EXPECT_EQ(processes.live(61 * kSecond).size(), 1u);
}

TEST(KinetoProcesses, OneUidTakesAtMostItsShareAndOthersStillGetIn) {
  KinetoProcesses processes;
  const int32_t per_uid = static_cast<int32_t>(KinetoProcesses::kMaxProcessesPerUid);
  for (int32_t pid = 1; pid <= per_uid; ++pid) poll(processes, pid, 0, 3, 666);
  PollRefusal refused = PollRefusal::kNone;
  EXPECT_EQ(processes.on_poll(sender_of(per_uid + 1, 666), poll_of(per_uid + 1), 0, refused), "");
  EXPECT_EQ(refused, PollRefusal::kUidCap);
  // Another user's process is known at once.
  poll(processes, 50'000, 0, 3, 1000);
  EXPECT_EQ(processes.live(0).size(), KinetoProcesses::kMaxProcessesPerUid + 1);
}

TEST(KinetoProcesses, APollerCannotPushACapturesStartBeyondTheBound) {
  KinetoProcesses processes;
  poll(processes, 10, 0);
  poll(processes, 11, 0);
  poll(processes, 11, 2 * kSecond);
  // Two polls 58 s apart claim a 58 s interval: the capture waits no longer than the bound.
  poll(processes, 10, 58 * kSecond);
  EXPECT_EQ(processes.longest_poll_interval_ns(58 * kSecond), KinetoProcesses::kMaxAwaitedPollIntervalNs);
}

TEST(KinetoProcesses, APidReusedByAnotherUserIsANewProcess) {
  KinetoProcesses processes;
  poll(processes, 77, 0, 3, 1000);
  processes.request_trace(77, "FOR-1000\n");
  // The pid now belongs to uid 2000's process: the request was not for it.
  EXPECT_EQ(poll(processes, 77, kSecond, 3, 2000), "");
  const std::vector<KinetoProcess> live = processes.live(kSecond);
  ASSERT_EQ(live.size(), 1u);
  EXPECT_EQ(live[0].uid, 2000u);
  EXPECT_EQ(live[0].poll_interval_ns, 0);
}

TEST(KinetoProcesses, ARegistrationRecordsTheGpu) {
  KinetoProcesses processes;
  poll(processes, 5, 0);
  poll(processes, 6, 0);
  EXPECT_EQ(processes.on_registration(sender_of(5), {3, 5, 9}), 1);
  EXPECT_EQ(processes.on_registration(sender_of(6), {3, 6, 9}), 2);
  EXPECT_EQ(processes.live(0)[0].gpu, 3);
}

}  // namespace
}  // namespace podscope::agent
