#include "daemon/local_address.h"

#include <gtest/gtest.h>

namespace podscope {
namespace {

TEST(LocalAddress, AWildcardHostIsReachedOnLoopback) {
  EXPECT_EQ(local_address("0.0.0.0:0", 41234), "127.0.0.1:41234");
  EXPECT_EQ(local_address(":8466", 8466), "127.0.0.1:8466");
  EXPECT_EQ(local_address("[::]:8466", 8466), "[::1]:8466");
}

TEST(LocalAddress, AGivenHostIsKeptWithTheBoundPort) {
  EXPECT_EQ(local_address("10.0.0.5:0", 9466), "10.0.0.5:9466");
  EXPECT_EQ(local_address("127.0.0.1:0", 35000), "127.0.0.1:35000");
  EXPECT_EQ(local_address("[fd00::5]:0", 9466), "[fd00::5]:9466");
  EXPECT_EQ(local_address("localhost:8466", 8466), "localhost:8466");
}

TEST(IsThisHost, LoopbackAndTheHostsOwnInterfaceAddressesOnly) {
  EXPECT_TRUE(is_this_host("127.0.0.1"));
  EXPECT_TRUE(is_this_host("127.0.1.1"));
  EXPECT_TRUE(is_this_host("::1"));
  EXPECT_FALSE(is_this_host("192.0.2.1"));  // TEST-NET-1: never a local interface
  EXPECT_FALSE(is_this_host("2001:db8::1"));
  EXPECT_FALSE(is_this_host("localhost"));  // names are resolved first: only addresses are judged
  EXPECT_FALSE(is_this_host(""));
}

}  // namespace
}  // namespace podscope
