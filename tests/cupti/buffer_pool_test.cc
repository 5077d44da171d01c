// The CUPTI activity buffer pool: bounded, aligned as CUPTI requires, and reusing what it allocated.
#include "cupti/buffer_pool.h"

#include <cstdint>

#include <gtest/gtest.h>

namespace podscope::cupti {
namespace {

TEST(BufferPoolTest, NeverAllocatesMoreThanItsCapAndReusesReturnedBuffers) {
  BufferPool pool(1 << 16, 2);
  uint8_t* a = pool.take();
  uint8_t* b = pool.take();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(pool.take(), nullptr);  // all in flight: CUPTI will drop records rather than grow memory
  pool.give_back(a);
  EXPECT_EQ(pool.take(), a);
  EXPECT_EQ(pool.allocated(), 2u);
  pool.give_back(nullptr);  // what a refused request hands back
  EXPECT_EQ(pool.take(), nullptr);
}

}  // namespace
}  // namespace podscope::cupti
