// The per-thread ring: records come out in order, multi-record units are all-or-nothing, a full ring
// drops and counts instead of blocking, and a consumer on another thread sees every published record.
#include "client/thread_ring.h"

#include <gtest/gtest.h>

#include <thread>

namespace podscope::client {
namespace {

RawEvent ev(uint64_t begin) { return RawEvent{begin, begin + 1, 0, 0, 0, 1, 0}; }

TEST(ThreadRing, FullRingDropsAndCounts) {
  ThreadRing ring(4, 1);
  for (uint64_t i = 1; i <= 4; ++i) {
    RawEvent e = ev(i);
    EXPECT_TRUE(ring.push(&e, 1));
  }
  RawEvent e = ev(5);
  EXPECT_FALSE(ring.push(&e, 1));
  EXPECT_EQ(ring.dropped(), 1u);
  std::vector<uint64_t> seen;
  ring.drain([&](const RawEvent& r) { seen.push_back(r.begin_tick); });
  EXPECT_EQ(seen, (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(ring.push(&e, 1));  // room again
}

TEST(ThreadRing, TwoRecordUnitsAreAllOrNothing) {
  ThreadRing ring(4, 1);
  RawEvent pair[2] = {ev(1), ev(2)};
  EXPECT_TRUE(ring.push(pair, 2));
  RawEvent one = ev(3);
  EXPECT_TRUE(ring.push(&one, 1));
  EXPECT_FALSE(ring.push(pair, 2));  // one slot left: the pair is dropped whole
  size_t n = 0;
  ring.drain([&](const RawEvent&) { ++n; });
  EXPECT_EQ(n, 3u);
}

TEST(ThreadRing, ConcurrentConsumerSeesEveryRecordInOrder) {
  ThreadRing ring(1024, 1);
  constexpr uint64_t kCount = 200000;
  std::thread producer([&] {
    for (uint64_t i = 1; i <= kCount;) {
      RawEvent e = ev(i);
      if (ring.push(&e, 1)) ++i;  // retry when full (the real producer would drop)
    }
  });
  uint64_t expected = 1;
  bool in_order = true;
  while (expected <= kCount) {
    ring.drain([&](const RawEvent& r) {
      in_order &= r.begin_tick == expected;
      ++expected;
    });
  }
  producer.join();
  EXPECT_TRUE(in_order);
}

}  // namespace
}  // namespace podscope::client
