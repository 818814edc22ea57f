#include "chameleon/daemon/policy_publisher.h"

#include <gtest/gtest.h>

#include "chameleon/ipc/segment.h"

namespace chameleon::daemon {
namespace {

class PolicyPublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ipc::SegmentGeometry geometry;
    geometry.ring_capacity = 1u << 16;
    geometry.policy_slot_bytes = 4096;
    ASSERT_EQ(ipc::Segment::Create(geometry, &segment_), ipc::SegmentError::kOk);
    publisher_ = std::make_unique<PolicyPublisher>(who_, segment_.mailbox_writer());
    reader_ = segment_.mailbox_reader();
  }

  /// The policy the shim would read now.
  ipc::Policy Read() {
    EXPECT_EQ(reader_.Poll(), ipc::ReadResult::kNew);
    ipc::Policy policy;
    EXPECT_EQ(ipc::DecodePolicy(reader_.blob(), &policy), ipc::BlobError::kOk);
    return policy;
  }

  ClientIdentity who_;
  ipc::Segment segment_;
  std::unique_ptr<PolicyPublisher> publisher_;
  ipc::PolicyMailboxReader reader_;
};

TEST_F(PolicyPublisherTest, StampsStageIterationAndBoundaryOnEachGeneration) {
  EXPECT_EQ(publisher_->generation(), 0u);
  ASSERT_TRUE(publisher_->Publish(nullptr, Stage::kWarmup, 0, {}));
  EXPECT_EQ(publisher_->generation(), 1u);
  ipc::Policy base;
  base.summary.predicted_iteration_s = 0.5;
  base.entries.resize(2);
  ASSERT_TRUE(publisher_->Publish(&base, Stage::kGenPolicy, 107, {1, 1, 20}));
  EXPECT_EQ(publisher_->generation(), 2u);
  EXPECT_EQ(publisher_->published(), 2u);
  const ipc::Policy read = Read();
  EXPECT_EQ(read.summary.generation, 2u);
  EXPECT_EQ(read.summary.stage, static_cast<std::uint32_t>(Stage::kGenPolicy));
  EXPECT_EQ(read.summary.iteration_ops, 107u);
  EXPECT_DOUBLE_EQ(read.summary.predicted_iteration_s, 0.5);
  EXPECT_EQ(read.boundary, (std::vector<std::uint32_t>{1, 1, 20}));
  EXPECT_EQ(read.entries.size(), 2u);
}

TEST_F(PolicyPublisherTest, APolicyLargerThanTheSlotIsRefusedAndCounted) {
  ASSERT_TRUE(publisher_->Publish(nullptr, Stage::kWarmup, 0, {}));
  ipc::Policy huge;
  huge.entries.resize(4096);  // far more than a 4 KiB slot holds
  EXPECT_FALSE(publisher_->Publish(&huge, Stage::kGenPolicy, 0, {}));
  EXPECT_EQ(publisher_->refused(), 1u);
  EXPECT_EQ(publisher_->published(), 1u);
  EXPECT_EQ(publisher_->generation(), 1u);  // the shim keeps the last one that fitted
  EXPECT_EQ(Read().summary.generation, 1u);
}

}  // namespace
}  // namespace chameleon::daemon
