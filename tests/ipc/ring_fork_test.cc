// The event ring across two processes (fork): the shim and the daemon in miniature.
#include <sched.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

using testing::kLaunchRecordBytes;
using testing::LaunchSeq;
using testing::PushLaunch;

constexpr std::uint64_t kDeadlineNs = 60ull * 1000 * 1000 * 1000;

// Reference model of the producer's space check: how many of `attempts` records of `record`
// bytes a ring of `capacity` accepts when the consumer does not move (head fixed).
std::uint64_t ModelAccepted(std::uint64_t* tail, std::uint64_t head, std::uint64_t capacity,
                            std::uint64_t record, std::uint64_t attempts) {
  std::uint64_t accepted = 0;
  for (std::uint64_t i = 0; i < attempts; ++i) {
    const std::uint64_t to_end = capacity - *tail % capacity;
    const std::uint64_t pad = record > to_end ? to_end : 0;
    if (*tail + pad + record - head > capacity) continue;
    *tail += pad + record;
    ++accepted;
  }
  return accepted;
}

TEST(RingForkTest, ShouldDeliverTenMillionRecordsContiguouslyWhenConsumerKeepsUp) {
  const std::uint64_t total = 10'000'000 / testing::kScale;
  Segment segment;
  ASSERT_EQ(Segment::Create(SegmentGeometry{}, &segment), SegmentError::kOk);
  const pid_t child = testing::ForkChild([&] {
    EventRingProducer producer = segment.ring_producer();
    SegmentHeader* h = segment.header();
    for (std::uint64_t seq = 0; seq < total;) {
      if (PushLaunch(&producer, seq) == PushResult::kOk) {
        ++seq;
      } else {
        // Back-pressure for this test only (the shim drops): count and retry the same record.
        h->records_dropped.fetch_add(1, std::memory_order_relaxed);
        sched_yield();
      }
    }
    h->records_written.store(total, std::memory_order_release);
    return 0;
  });
  ASSERT_GT(child, 0);
  EventRingConsumer consumer = segment.ring_consumer();
  std::uint64_t expected = 0, mismatches = 0;
  const std::uint64_t deadline = MonotonicNowNs() + kDeadlineNs;
  while (expected < total && MonotonicNowNs() < deadline) {
    const std::size_t n =
        consumer.Drain([&](const RecordView& v) { mismatches += LaunchSeq(v) != expected++; }, 4096,
                       MonotonicNowNs(), kDeadlineNs);
    if (n == 0) sched_yield();
  }
  const int status = testing::WaitStatus(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(expected, total);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(consumer.last_error(), DrainError::kNone);
  EXPECT_EQ(consumer.corrupt() + consumer.repaired(), 0u);
  EXPECT_EQ(segment.header()->records_written.load(), total);
  ::testing::Test::RecordProperty("full_retries",
                                  std::to_string(segment.header()->records_dropped.load()));
}

TEST(RingForkTest, ShouldDropExactlyWhatDoesNotFitWhileConsumerIsPaused) {
  constexpr std::uint64_t kCapacity = 64 << 10, kAttempts = 5000;
  Segment segment;
  ASSERT_EQ(Segment::Create(SegmentGeometry{kCapacity, 4096, 4096}, &segment), SegmentError::kOk);
  int produced[2], drained[2];
  ASSERT_EQ(pipe(produced), 0);
  ASSERT_EQ(pipe(drained), 0);
  const pid_t child = testing::ForkChild([&] {
    EventRingProducer producer = segment.ring_producer();
    SegmentHeader* h = segment.header();
    for (int phase = 0; phase < 2; ++phase) {
      for (std::uint64_t i = 0; i < kAttempts; ++i) {
        const PushResult r = PushLaunch(&producer, phase * kAttempts + i);
        (r == PushResult::kOk ? h->records_written : h->records_dropped).fetch_add(1);
      }
      if (!testing::Signal(produced[1])) return 1;
      if (phase == 0 && !testing::AwaitSignal(drained[0])) return 2;
    }
    return 0;
  });
  ASSERT_GT(child, 0);
  EventRingConsumer consumer = segment.ring_consumer();
  std::uint64_t model_tail = 0, head = 0, total_fits = 0;
  for (std::uint64_t phase = 0; phase < 2; ++phase) {
    ASSERT_TRUE(testing::AwaitSignal(produced[0]));  // the consumer stayed paused until now
    const std::uint64_t fits =
        ModelAccepted(&model_tail, head, kCapacity, kLaunchRecordBytes, kAttempts);
    ASSERT_GT(fits, 1000u);
    ASSERT_LT(fits, kAttempts);
    std::vector<std::uint64_t> seqs;
    consumer.Drain([&](const RecordView& v) { seqs.push_back(LaunchSeq(v)); }, 1u << 20, 0, 1);
    head = model_tail;
    EXPECT_EQ(seqs.size(), fits);
    for (std::uint64_t i = 0; i < seqs.size(); ++i) ASSERT_EQ(seqs[i], phase * kAttempts + i);
    total_fits += fits;
    EXPECT_EQ(segment.header()->records_written.load(), total_fits);
    EXPECT_EQ(segment.header()->records_dropped.load(), (phase + 1) * kAttempts - total_fits);
    if (phase == 0) {
      ASSERT_TRUE(testing::Signal(drained[1]));
    }
  }
  const int status = testing::WaitStatus(child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(consumer.last_error(), DrainError::kNone);
}

}  // namespace
}  // namespace chameleon::ipc
