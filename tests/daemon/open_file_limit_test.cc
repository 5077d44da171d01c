#include "daemon/open_file_limit.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

namespace podscope {
namespace {

TEST(OpenFileLimit, SoftLimitIsRaisedToTheHardLimit) {
  rlimit original{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &original), 0);
  if (original.rlim_max < 512) GTEST_SKIP() << "hard limit " << original.rlim_max << " leaves nothing to raise";
  rlimit low = original;
  low.rlim_cur = 256;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &low), 0);
  EXPECT_EQ(raise_open_file_limit(), original.rlim_max);
  rlimit now{};
  ::getrlimit(RLIMIT_NOFILE, &now);
  EXPECT_EQ(now.rlim_cur, original.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &original);
}

}  // namespace
}  // namespace podscope
