// Event ring: single-threaded behaviour of producer and consumer.
#include "chameleon/ipc/event_ring.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

using testing::kLaunchRecordBytes;
using testing::LaunchSeq;
using testing::PushLaunch;

class EventRingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &segment_), SegmentError::kOk);
    producer_ = segment_.ring_producer();
    consumer_ = segment_.ring_consumer();
    descriptor_ = reinterpret_cast<EventRingDescriptor*>(
        reinterpret_cast<std::uint8_t*>(segment_.header()) + segment_.header()->ring_offset);
  }
  // Drains everything; returns the sequence numbers of the launch records seen.
  std::vector<std::uint64_t> DrainSeqs(std::uint64_t now = 0) {
    std::vector<std::uint64_t> seqs;
    consumer_.Drain([&](const RecordView& v) { seqs.push_back(LaunchSeq(v)); }, 1u << 20, now,
                    1000);
    return seqs;
  }
  Segment segment_;
  EventRingProducer producer_;
  EventRingConsumer consumer_;
  EventRingDescriptor* descriptor_ = nullptr;
};

TEST_F(EventRingTest, ShouldDeliverRecordsInOrderWithTypeFlagsAndPayload) {
  ASSERT_EQ(PushLaunch(&producer_, 7), PushResult::kOk);
  const AllocRecord alloc{1, 0x1000, 4096, 0, 0, 0, 1, 0};
  ASSERT_EQ(producer_.Push(RecordType::kAlloc, kFlagDetailed, &alloc, sizeof(alloc)),
            PushResult::kOk);
  // Views point into the ring and are only valid inside the handler: copy what we check.
  std::vector<RecordView> seen;
  std::vector<std::vector<std::uint8_t>> payloads;
  std::uint64_t seq = 0;
  const std::size_t n = consumer_.Drain(
      [&](const RecordView& v) {
        if (seen.empty()) seq = LaunchSeq(v);
        seen.push_back(v);
        payloads.emplace_back(v.payload.begin(), v.payload.end());
      },
      10, 0, 1000);
  ASSERT_EQ(n, 2u);
  EXPECT_EQ(seq, 7u);
  EXPECT_EQ(seen[0].type, RecordType::kLaunch);
  EXPECT_EQ(seen[1].type, RecordType::kAlloc);
  EXPECT_EQ(seen[1].flags, kFlagDetailed);
  ASSERT_EQ(payloads[1].size(), sizeof(alloc));
  EXPECT_EQ(std::memcmp(payloads[1].data(), &alloc, sizeof(alloc)), 0);
  EXPECT_EQ(consumer_.last_error(), DrainError::kNone);
}

TEST_F(EventRingTest, ShouldDropAndCountWhenFull) {
  const std::uint64_t fits = producer_.capacity() / kLaunchRecordBytes;
  std::uint64_t seq = 0;
  while (PushLaunch(&producer_, seq) == PushResult::kOk) ++seq;
  EXPECT_EQ(seq, fits);
  // The caller counts drops; every further record is refused whole.
  for (int i = 0; i < 5; ++i) {
    if (PushLaunch(&producer_, seq + i) == PushResult::kFull) {
      segment_.header()->records_dropped.fetch_add(1, std::memory_order_relaxed);
    }
  }
  EXPECT_EQ(segment_.header()->records_dropped.load(), 5u);
  const auto seqs = DrainSeqs();
  ASSERT_EQ(seqs.size(), fits);
  for (std::uint64_t i = 0; i < fits; ++i) EXPECT_EQ(seqs[i], i);
  // Space is back once the consumer has committed.
  EXPECT_EQ(PushLaunch(&producer_, 1000), PushResult::kOk);
}

TEST_F(EventRingTest, ShouldPadInsteadOfWrappingAcrossManyLaps) {
  // Odd-sized records so the end of the ring is hit at varying offsets.
  std::uint64_t pushed = 0, received = 0;
  std::vector<std::uint8_t> payload(600);
  for (int lap = 0; lap < 200; ++lap) {
    for (int i = 0; i < 3; ++i) {
      const std::size_t bytes = 16 + (pushed * 37) % 500;
      for (std::size_t b = 0; b < bytes; ++b) payload[b] = static_cast<std::uint8_t>(pushed + b);
      const FreeRecord id{pushed, 0};
      std::memcpy(payload.data(), &id, sizeof(id));
      ASSERT_EQ(producer_.Push(RecordType::kFree, 0, payload.data(), bytes), PushResult::kOk);
      ++pushed;
    }
    consumer_.Drain(
        [&](const RecordView& v) {
          const std::size_t bytes = 16 + (received * 37) % 500;
          ASSERT_EQ(v.payload.size(), bytes);
          FreeRecord id;
          std::memcpy(&id, v.payload.data(), sizeof(id));
          EXPECT_EQ(id.id, received);
          for (std::size_t b = sizeof(id); b < bytes; ++b) {
            ASSERT_EQ(v.payload[b], static_cast<std::uint8_t>(received + b));
          }
          ++received;
        },
        100, 0, 1000);
  }
  EXPECT_EQ(received, pushed);
  EXPECT_GT(descriptor_->tail.load(), 10 * producer_.capacity());  // really wrapped many times
  EXPECT_EQ(consumer_.last_error(), DrainError::kNone);
}

TEST_F(EventRingTest, ShouldRefuseRecordLargerThanMaxWithoutWriting) {
  std::vector<std::uint8_t> big(kMaxRecordBytes);
  EXPECT_EQ(producer_.Push(RecordType::kLaunch, 0, big.data(), big.size()), PushResult::kTooLarge);
  EXPECT_EQ(descriptor_->tail.load(), 0u);
  EXPECT_TRUE(DrainSeqs().empty());
}

TEST_F(EventRingTest, ShouldPublishHeadOnlyOncePerBatch) {
  for (int i = 0; i < 5; ++i) ASSERT_EQ(PushLaunch(&producer_, i), PushResult::kOk);
  std::vector<std::uint64_t> heads_seen;
  consumer_.Drain([&](const RecordView&) { heads_seen.push_back(descriptor_->head.load()); }, 10, 0,
                  1000);
  EXPECT_EQ(heads_seen, std::vector<std::uint64_t>(5, 0));
  EXPECT_EQ(descriptor_->head.load(), descriptor_->tail.load());
}

TEST_F(EventRingTest, ShouldRereadHeadOnlyWhenCacheSaysFull) {
  for (int i = 0; i < 10; ++i) ASSERT_EQ(PushLaunch(&producer_, i), PushResult::kOk);
  DrainSeqs();
  ASSERT_GT(descriptor_->head.load(), 0u);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(PushLaunch(&producer_, i), PushResult::kOk);
  EXPECT_EQ(descriptor_->head_cache.load(), 0u);  // not full yet: head never read
  std::uint64_t seq = 0;
  while (PushLaunch(&producer_, seq) == PushResult::kOk) ++seq;
  EXPECT_EQ(descriptor_->head_cache.load(), descriptor_->head.load());
}

TEST_F(EventRingTest, ShouldHandOutAtMostMaxRecordsAndKeepTheRest) {
  for (int i = 0; i < 5; ++i) ASSERT_EQ(PushLaunch(&producer_, i), PushResult::kOk);
  std::vector<std::uint64_t> first;
  EXPECT_EQ(consumer_.Drain([&](const RecordView& v) { first.push_back(LaunchSeq(v)); }, 3, 0, 1),
            3u);
  EXPECT_EQ(first, (std::vector<std::uint64_t>{0, 1, 2}));
  EXPECT_EQ(DrainSeqs(), (std::vector<std::uint64_t>{3, 4}));
}

TEST_F(EventRingTest, ShouldResumeAtStoredPositionsWhenEndsAreRecreated) {
  for (int i = 0; i < 4; ++i) ASSERT_EQ(PushLaunch(&producer_, i), PushResult::kOk);
  consumer_.Drain([](const RecordView&) {}, 2, 0, 1);
  EventRingProducer producer2 = segment_.ring_producer();
  EventRingConsumer consumer2 = segment_.ring_consumer();
  ASSERT_EQ(PushLaunch(&producer2, 4), PushResult::kOk);
  std::vector<std::uint64_t> seqs;
  consumer2.Drain([&](const RecordView& v) { seqs.push_back(LaunchSeq(v)); }, 10, 0, 1);
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{2, 3, 4}));
}

TEST_F(EventRingTest, ShouldSkipStuckClaimOnlyAfterTimeout) {
  // A writer that died between claim and commit: negative length at the read position.
  const std::int32_t claimed = -static_cast<std::int32_t>(kLaunchRecordBytes);
  reinterpret_cast<RecordHeader*>(reinterpret_cast<std::uint8_t*>(descriptor_) +
                                  sizeof(EventRingDescriptor))
      ->length.store(claimed);
  descriptor_->tail.store(kLaunchRecordBytes);
  EventRingProducer producer = segment_.ring_producer();  // a fresh producer resumes after it
  ASSERT_EQ(PushLaunch(&producer, 1), PushResult::kOk);

  EXPECT_TRUE(DrainSeqs(/*now=*/100).empty());   // starts the stuck timer
  EXPECT_TRUE(DrainSeqs(/*now=*/1099).empty());  // 999 ns < 1000 ns timeout
  EXPECT_EQ(consumer_.repaired(), 0u);
  EXPECT_EQ(DrainSeqs(/*now=*/1100), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(consumer_.repaired(), 1u);
  EXPECT_EQ(consumer_.last_error(), DrainError::kStuckRecordRepaired);
  EXPECT_EQ(consumer_.corrupt(), 0u);
  EXPECT_EQ(descriptor_->head.load(), descriptor_->tail.load());
}

TEST_F(EventRingTest, ShouldRestartStuckTimerWhenTheRecordCommits) {
  const std::int32_t claimed = -static_cast<std::int32_t>(kLaunchRecordBytes);
  auto* header = reinterpret_cast<RecordHeader*>(reinterpret_cast<std::uint8_t*>(descriptor_) +
                                                 sizeof(EventRingDescriptor));
  header->length.store(claimed);
  EXPECT_TRUE(DrainSeqs(/*now=*/0).empty());
  header->length.store(0);  // back to nothing; then a real record arrives at that position
  ASSERT_EQ(PushLaunch(&producer_, 9), PushResult::kOk);
  EXPECT_EQ(DrainSeqs(/*now=*/5000), (std::vector<std::uint64_t>{9}));
  EXPECT_EQ(consumer_.repaired(), 0u);
}

TEST_F(EventRingTest, ShouldTreatHeadAheadOfTailAsFull) {
  std::uint64_t seq = 0;
  while (PushLaunch(&producer_, seq) == PushResult::kOk) ++seq;
  const std::uint64_t tail = descriptor_->tail.load();
  descriptor_->head.store(tail + (1u << 20));  // a scribbling consumer
  for (int i = 0; i < 200; ++i) ASSERT_EQ(PushLaunch(&producer_, i), PushResult::kFull);
  EXPECT_EQ(descriptor_->tail.load(), tail);  // nothing overwritten
}

TEST(ValidateRecordTest, ShouldCheckTypeAndMinimumPayload) {
  std::uint8_t bytes[64] = {};
  EXPECT_EQ(ValidateRecord(RecordType::kAlloc, {bytes, sizeof(AllocRecord)}), DrainError::kNone);
  EXPECT_EQ(ValidateRecord(RecordType::kAlloc, {bytes, 64}), DrainError::kNone);  // newer minor
  EXPECT_EQ(ValidateRecord(RecordType::kAlloc, {bytes, sizeof(AllocRecord) - 1}),
            DrainError::kBadPayload);
  EXPECT_EQ(ValidateRecord(static_cast<RecordType>(99), {bytes, 64}), DrainError::kBadType);
  EXPECT_EQ(ValidateRecord(RecordType::kPadding, {bytes, 64}), DrainError::kBadType);
  LaunchRecord launch{kFirstKernelToken, 3, 0, 0};
  std::memcpy(bytes, &launch, sizeof(launch));
  EXPECT_EQ(ValidateRecord(RecordType::kLaunch, {bytes, 16 + 24}), DrainError::kNone);
  EXPECT_EQ(ValidateRecord(RecordType::kLaunch, {bytes, 16 + 16}), DrainError::kBadPayload);
  launch.tensor_count = kMaxLaunchTensors + 1;
  std::memcpy(bytes, &launch, sizeof(launch));
  EXPECT_EQ(ValidateRecord(RecordType::kLaunch, {bytes, 64}), DrainError::kBadPayload);
  EXPECT_STRNE(ToString(DrainError::kBadType), ToString(DrainError::kBadPayload));
}

TEST(ValidateRecordTest, ShouldCheckThePointerTargetsCountAgainstItsIds) {
  std::uint8_t bytes[16 + 8 * (kMaxPointerTargetsPerRecord + 1)] = {};
  PointerTargetsRecord targets{3, 0, 1};
  std::memcpy(bytes, &targets, sizeof(targets));
  EXPECT_EQ(ValidateRecord(RecordType::kPointerTargets, {bytes, 16 + 24}), DrainError::kNone);
  EXPECT_EQ(ValidateRecord(RecordType::kPointerTargets, {bytes, 16 + 16}),
            DrainError::kBadPayload);  // claims 3 ids, carries 2
  EXPECT_EQ(ValidateRecord(RecordType::kPointerTargets, {bytes, 15}), DrainError::kBadPayload);
  targets.count = kMaxPointerTargetsPerRecord + 1;
  std::memcpy(bytes, &targets, sizeof(targets));
  EXPECT_EQ(ValidateRecord(RecordType::kPointerTargets, {bytes, sizeof(bytes)}),
            DrainError::kBadPayload);
  targets.count = 0;  // an empty scan report is well formed
  std::memcpy(bytes, &targets, sizeof(targets));
  EXPECT_EQ(ValidateRecord(RecordType::kPointerTargets, {bytes, 16}), DrainError::kNone);
}

TEST(ValidateRecordTest, ShouldCheckTheOpTimesCountAgainstItsEntries) {
  std::uint8_t bytes[8 + 8 * (kMaxOpTimesPerRecord + 1)] = {};
  OpTimesRecord times{2, 0};
  std::memcpy(bytes, &times, sizeof(times));
  EXPECT_EQ(ValidateRecord(RecordType::kOpTimes, {bytes, 8 + 16}), DrainError::kNone);
  EXPECT_EQ(ValidateRecord(RecordType::kOpTimes, {bytes, 8 + 8}),
            DrainError::kBadPayload);  // claims 2 entries, carries 1
  EXPECT_EQ(ValidateRecord(RecordType::kOpTimes, {bytes, 7}), DrainError::kBadPayload);
  times.count = kMaxOpTimesPerRecord + 1;
  std::memcpy(bytes, &times, sizeof(times));
  EXPECT_EQ(ValidateRecord(RecordType::kOpTimes, {bytes, sizeof(bytes)}), DrainError::kBadPayload);
}

}  // namespace
}  // namespace chameleon::ipc
