#include "agent/kineto/process_lineage.h"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace podscope::agent {
namespace {

TEST(ProcessStatus, ParsesTheParentAndThePidInEachNamespace) {
  const auto status = parse_process_status("Name:\tpython\nPid:\t5120\nPPid:\t5100\nNSpid:\t5120\t7\n");
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->parent, 5100);
  EXPECT_EQ(status->namespace_pids, (std::vector<int32_t>{5120, 7}));
  EXPECT_FALSE(parse_process_status("Name:\tx\nPPid:\t1\n").has_value());
  EXPECT_FALSE(parse_process_status("PPid:\tx\nNSpid:\t3\n").has_value());
}

kineto::ipc::Sender me() { return {::getpid(), static_cast<uint32_t>(::getuid()), static_cast<uint32_t>(::getgid())}; }

TEST(VerifySender, TheSenderAndItsRealAncestorsHold) {
  // Kineto's chain: the process, its parent, and further up.
  const auto verified = verify_sender(me(), {::getpid(), ::getppid()});
  ASSERT_TRUE(std::holds_alternative<VerifiedSender>(verified)) << lie_name(std::get<Lie>(verified));
  const VerifiedSender& s = std::get<VerifiedSender>(verified);
  EXPECT_EQ(s.pid, ::getpid());
  EXPECT_EQ(s.own_pid, ::getpid());
  EXPECT_EQ(s.uid, ::getuid());
  ASSERT_FALSE(s.ancestors.empty());
  EXPECT_EQ(s.ancestors.front(), ::getppid());
}

TEST(VerifySender, AnotherProcessOrAnAncestorItDoesNotHaveIsALie) {
  EXPECT_EQ(std::get<Lie>(verify_sender(me(), {1})), Lie::kForgedPid);
  EXPECT_EQ(std::get<Lie>(verify_sender(me(), {::getpid() + 1})), Lie::kForgedPid);
  // A live process that is not an ancestor: a child of this one.
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  EXPECT_EQ(std::get<Lie>(verify_sender(me(), {::getpid(), child})), Lie::kForgedAncestor);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(VerifySender, WithoutCredentialsOrAProcessNothingIsVerified) {
  EXPECT_EQ(std::get<Lie>(verify_sender(std::nullopt, {::getpid()})), Lie::kUnverified);
  EXPECT_EQ(std::get<Lie>(verify_sender(kineto::ipc::Sender{0, 0, 0}, {::getpid()})), Lie::kUnverified);
  // A process gone by the time its datagram is read.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(std::get<Lie>(verify_sender(kineto::ipc::Sender{child, 0, 0}, {child})), Lie::kUnverified);
}

}  // namespace
}  // namespace podscope::agent
