// PODSCOPE_LOG as a statement: a line below the threshold is never built, and the macro is one statement as the
// branch of an unbraced if, so an else after it belongs to that if.
#include "daemon/log.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace podscope {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int counted(int& calls) {
  ++calls;
  return calls;
}

TEST(Log, ALineBelowTheThresholdIsNeverBuilt) {
  set_log_level(LogLevel::kWarning);
  int calls = 0;
  ::testing::internal::CaptureStderr();
  PODSCOPE_LOG(kInfo) << "not shown " << counted(calls);
  PODSCOPE_LOG(kError) << "shown " << counted(calls);
  const std::string err = ::testing::internal::GetCapturedStderr();
  set_log_level(LogLevel::kInfo);
  EXPECT_EQ(calls, 1);
  EXPECT_THAT(err, HasSubstr("shown 1"));
  EXPECT_THAT(err, Not(HasSubstr("not shown")));
}

TEST(Log, AnElseAfterTheMacroBelongsToTheIfItIsTheBranchOf) {
  set_log_level(LogLevel::kInfo);
  for (const bool condition : {true, false}) {
    bool else_taken = false;
    ::testing::internal::CaptureStderr();
    if (condition) PODSCOPE_LOG(kInfo) << "branch taken";
    else else_taken = true;
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(else_taken, !condition);
    EXPECT_EQ(err.find("branch taken") != std::string::npos, condition) << err;
  }
}

}  // namespace
}  // namespace podscope
