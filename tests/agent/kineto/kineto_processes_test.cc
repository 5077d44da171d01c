#include "agent/kineto/kineto_processes.h"

#include <gtest/gtest.h>

namespace podscope::agent {
namespace {

constexpr int64_t kSecond = 1'000'000'000;

kineto::ipc::Poll poll_of(int32_t pid, int32_t config_type = 3) { return {config_type, 9, {pid, 100, 1}}; }

std::string poll(KinetoProcesses& processes, int32_t pid, int64_t now, int32_t config_type = 3) {
  bool at_cap = false;
  std::string answer = processes.on_poll(poll_of(pid, config_type), now, at_cap);
  EXPECT_FALSE(at_cap);
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
  for (int32_t pid = 1; pid <= static_cast<int32_t>(KinetoProcesses::kMaxProcesses); ++pid) poll(processes, pid, 0);
  processes.request_trace(999'999, "X\n");
  bool at_cap = false;
  EXPECT_EQ(processes.on_poll(poll_of(999'999), 1, at_cap), "");
  EXPECT_TRUE(at_cap);
  EXPECT_EQ(processes.live(1).size(), KinetoProcesses::kMaxProcesses);
  // Once the others fall silent, room is made.
  EXPECT_EQ(processes.on_poll(poll_of(999'999), 61 * kSecond, at_cap), "X\n");
  EXPECT_FALSE(at_cap);
  EXPECT_EQ(processes.live(61 * kSecond).size(), 1u);
}

TEST(KinetoProcesses, ARegistrationRecordsTheGpu) {
  KinetoProcesses processes;
  poll(processes, 5, 0);
  poll(processes, 6, 0);
  EXPECT_EQ(processes.on_registration({3, 5, 9}), 1);
  EXPECT_EQ(processes.on_registration({3, 6, 9}), 2);
  EXPECT_EQ(processes.live(0)[0].gpu, 3);
}

}  // namespace
}  // namespace podscope::agent
