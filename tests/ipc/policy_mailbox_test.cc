// Policy mailbox: single-threaded behaviour (mailbox_concurrent_test.cc races a writer).
#include "chameleon/ipc/policy_mailbox.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

class PolicyMailboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &segment_), SegmentError::kOk);
    writer_ = segment_.mailbox_writer();
    reader_ = segment_.mailbox_reader();
    base_ = reinterpret_cast<std::uint8_t*>(segment_.header()) + segment_.header()->mailbox_offset;
  }
  PolicySlotHeader* Slot(int index) {
    return reinterpret_cast<PolicySlotHeader*>(base_ + sizeof(PolicyMailboxDescriptor) +
                                               index * (sizeof(PolicySlotHeader) + 4096));
  }
  static std::vector<std::uint8_t> Blob(std::size_t bytes, std::uint8_t seed) {
    std::vector<std::uint8_t> b(bytes);
    std::iota(b.begin(), b.end(), seed);
    return b;
  }
  std::vector<std::uint8_t> Got() { return {reader_.blob().begin(), reader_.blob().end()}; }
  Segment segment_;
  PolicyMailboxWriter writer_;
  PolicyMailboxReader reader_;
  std::uint8_t* base_ = nullptr;
};

TEST_F(PolicyMailboxTest, ShouldReportUnchangedBeforeFirstPublish) {
  EXPECT_EQ(reader_.Poll(), ReadResult::kUnchanged);
  EXPECT_EQ(reader_.generation(), 0u);
  EXPECT_TRUE(reader_.blob().empty());
}

TEST_F(PolicyMailboxTest, ShouldDeliverEachGenerationOnceInAlternatingSlots) {
  std::uint64_t g = 0;
  ASSERT_EQ(writer_.Publish(Blob(100, 1), &g), PublishResult::kOk);
  EXPECT_EQ(g, 1u);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  EXPECT_EQ(Got(), Blob(100, 1));
  EXPECT_EQ(reader_.Poll(), ReadResult::kUnchanged);
  ASSERT_EQ(writer_.Publish(Blob(13, 9), &g), PublishResult::kOk);  // not a multiple of 8
  EXPECT_EQ(g, 2u);
  EXPECT_EQ(Slot(1)->seq.load(), 2u);  // generation 1 in slot 1 ...
  EXPECT_EQ(Slot(0)->seq.load(), 4u);  // ... generation 2 in slot 0
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  EXPECT_EQ(reader_.generation(), 2u);
  EXPECT_EQ(Got(), Blob(13, 9));
}

TEST_F(PolicyMailboxTest, ShouldSkipToTheLatestGeneration) {
  for (std::uint8_t i = 1; i <= 5; ++i) ASSERT_EQ(writer_.Publish(Blob(64, i)), PublishResult::kOk);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  EXPECT_EQ(reader_.generation(), 5u);
  EXPECT_EQ(Got(), Blob(64, 5));
}

TEST_F(PolicyMailboxTest, ShouldRefuseAndCountBlobLargerThanSlotNeverTruncate) {
  ASSERT_EQ(writer_.Publish(Blob(4096, 3)), PublishResult::kOk);  // exactly a slot fits
  EXPECT_EQ(writer_.Publish(Blob(4097, 4)), PublishResult::kTooLarge);
  auto* descriptor = reinterpret_cast<PolicyMailboxDescriptor*>(base_);
  EXPECT_EQ(descriptor->refused_too_large.load(), 1u);
  EXPECT_EQ(descriptor->latest_generation.load(), 1u);
  EXPECT_EQ(writer_.generation(), 1u);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  EXPECT_EQ(Got(), Blob(4096, 3));
}

TEST_F(PolicyMailboxTest, ShouldKeepPreviousPolicyWhenSlotIsBeingRewritten) {
  ASSERT_EQ(writer_.Publish(Blob(40, 1)), PublishResult::kOk);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  ASSERT_EQ(writer_.Publish(Blob(40, 2)), PublishResult::kOk);
  Slot(0)->seq.store(5);  // as if generation 3 were being written over generation 2
  EXPECT_EQ(reader_.Poll(), ReadResult::kTorn);
  EXPECT_EQ(reader_.torn_reads(), 1u);
  EXPECT_EQ(reader_.generation(), 1u);
  EXPECT_EQ(Got(), Blob(40, 1));
  Slot(0)->seq.store(4);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  EXPECT_EQ(Got(), Blob(40, 2));
}

TEST_F(PolicyMailboxTest, ShouldReportCorruptHeaderFieldsAndKeepPreviousPolicy) {
  ASSERT_EQ(writer_.Publish(Blob(40, 1)), PublishResult::kOk);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  ASSERT_EQ(writer_.Publish(Blob(40, 2)), PublishResult::kOk);
  Slot(0)->blob_bytes.store(4097);
  EXPECT_EQ(reader_.Poll(), ReadResult::kCorrupt);
  EXPECT_EQ(Got(), Blob(40, 1));
  Slot(0)->blob_bytes.store(40);
  reinterpret_cast<PolicyMailboxDescriptor*>(base_)->latest_generation.store(0);
  EXPECT_EQ(reader_.Poll(), ReadResult::kCorrupt);  // generations never go backwards
  EXPECT_EQ(reader_.corrupt_reads(), 2u);
  EXPECT_EQ(reader_.generation(), 1u);
}

TEST_F(PolicyMailboxTest, ShouldContinueGenerationsWithANewWriter) {
  ASSERT_EQ(writer_.Publish(Blob(8, 1)), PublishResult::kOk);
  PolicyMailboxWriter restarted = segment_.mailbox_writer();
  std::uint64_t g = 0;
  ASSERT_EQ(restarted.Publish(Blob(8, 2), &g), PublishResult::kOk);
  EXPECT_EQ(g, 2u);
  ASSERT_EQ(reader_.Poll(), ReadResult::kNew);
  EXPECT_EQ(Got(), Blob(8, 2));
}

}  // namespace
}  // namespace chameleon::ipc
