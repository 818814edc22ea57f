// The event ring between two threads of one process (what ThreadSanitizer can check).
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <thread>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

using testing::LaunchSeq;
using testing::PushLaunch;

// Producer never retries; the consumer must see strictly increasing sequence numbers and
// received + dropped must equal what was attempted.
TEST(RingThreadsTest, ShouldAccountForEveryRecordAsReceivedOrDropped) {
  const std::uint64_t attempts = 2'000'000 / testing::kScale;
  Segment segment;
  ASSERT_EQ(Segment::Create(SegmentGeometry{64 << 10, 4096, 4096}, &segment), SegmentError::kOk);
  std::atomic<bool> done{false};
  std::uint64_t dropped = 0;
  std::latch start(2);
  std::thread producer_thread([&] {
    EventRingProducer producer = segment.ring_producer();
    start.arrive_and_wait();
    for (std::uint64_t seq = 0; seq < attempts; ++seq) {
      if (PushLaunch(&producer, seq) != PushResult::kOk) ++dropped;
    }
    done.store(true, std::memory_order_release);
  });
  EventRingConsumer consumer = segment.ring_consumer();
  std::uint64_t received = 0, last = 0, out_of_order = 0, garbled = 0;
  auto handle = [&](const RecordView& v) {
    const std::uint64_t seq = LaunchSeq(v);
    garbled += seq == ~0ull;
    out_of_order += received > 0 && seq <= last;
    last = seq;
    ++received;
  };
  start.arrive_and_wait();
  while (!done.load(std::memory_order_acquire)) consumer.Drain(handle, 1024, 0, ~0ull);
  consumer.Drain(handle, 1u << 30, 0, ~0ull);
  producer_thread.join();
  EXPECT_EQ(garbled, 0u);
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_EQ(received + dropped, attempts);
  EXPECT_EQ(consumer.last_error(), DrainError::kNone);
}

}  // namespace
}  // namespace chameleon::ipc
