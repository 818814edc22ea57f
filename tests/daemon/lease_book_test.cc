// LeaseBook's state machine with a hand-driven clock: grant, revoke, complete, hung past the
// deadline, client death. Byte figures are worked out by hand in each test.
#include "chameleon/daemon/lease_book.h"

#include <gtest/gtest.h>

namespace chameleon::daemon {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kSecond = 1'000'000'000;
const std::string kGpuA = "0000:18:00.0";
const std::string kGpuB = "0000:2a:00.0";
constexpr std::uint32_t kOwner = 1, kLessee = 2, kOther = 3;

class LeaseBookTest : public ::testing::Test {
 protected:
  // 80 GiB GPU, owner peak 30 GiB, reserve 2 GiB: 48 GiB spare.
  LeaseBook book_{2 * kGiB, 5 * kSecond};
  void SetUp() override { book_.SetLender(kGpuA, kOwner, 80 * kGiB, 30 * kGiB); }
};

TEST_F(LeaseBookTest, ShouldLendOnlyTheSpareAndOnlyToOthers) {
  EXPECT_EQ(book_.Spare(kGpuA), 48 * kGiB);
  EXPECT_EQ(book_.Spare(kGpuB), 0u) << "an unregistered GPU lends nothing";
  EXPECT_EQ(book_.Grant(kGpuA, kOwner, kGiB), 0u) << "an owner cannot borrow its own GPU";
  EXPECT_EQ(book_.Grant(kGpuA, kLessee, 49 * kGiB), 0u) << "more than the spare";
  const std::uint64_t id = book_.Grant(kGpuA, kLessee, 20 * kGiB);
  ASSERT_NE(id, 0u);
  EXPECT_EQ(book_.Spare(kGpuA), 28 * kGiB);
  EXPECT_EQ(book_.Grant(kGpuA, kLessee, 8 * kGiB), id) << "a second grant grows the same lease";
  ASSERT_EQ(book_.Active(kLessee).size(), 1u);
  EXPECT_EQ(book_.Active(kLessee)[0].bytes, 28 * kGiB);
  EXPECT_EQ(book_.LentBy(kOwner), 28 * kGiB);
  EXPECT_EQ(book_.Spare(kGpuA), 20 * kGiB);
  // The owner's peak grows by 10 GiB: the spare shrinks with it, leases stand.
  book_.SetLender(kGpuA, kOwner, 80 * kGiB, 40 * kGiB);
  EXPECT_EQ(book_.Spare(kGpuA), 10 * kGiB);
  // A lower peak later does not give memory back: the owner's high-water counts.
  book_.SetLender(kGpuA, kOwner, 80 * kGiB, 35 * kGiB);
  EXPECT_EQ(book_.Spare(kGpuA), 10 * kGiB);
}

TEST_F(LeaseBookTest, ShouldCompleteARevocationOnceTheLesseeAppliesTheOmittingPolicy) {
  const std::uint64_t id = book_.Grant(kGpuA, kLessee, 10 * kGiB);
  ASSERT_NE(id, 0u);
  book_.Pause(kGpuA);  // the owner asks its memory back
  EXPECT_EQ(book_.Spare(kGpuA), 0u);
  EXPECT_EQ(book_.Revoke(kGpuA, 100 * kSecond), std::vector<std::uint32_t>{kLessee});
  EXPECT_TRUE(book_.Active(kLessee).empty()) << "the next policy must omit it";
  EXPECT_EQ(book_.LentBy(kOwner), 10 * kGiB) << "lent until the lessee proves it moved out";
  // Before the omitting policy is published, nothing the lessee applies completes it.
  EXPECT_TRUE(book_.Applied(kLessee, 1000).empty());
  book_.Published(kLessee, 7);
  book_.Published(kLessee, 8);  // a later policy does not move the generation to comply with
  EXPECT_TRUE(book_.Applied(kLessee, 6).empty());
  const auto done = book_.Applied(kLessee, 7);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].lease.id, id);
  EXPECT_FALSE(done[0].hung);
  EXPECT_EQ(book_.LentBy(kOwner), 0u);
  EXPECT_TRUE(book_.Expire(1000 * kSecond).empty());
  // Lending resumes when the owner is registered again; ids are never reused.
  book_.SetLender(kGpuA, kOwner, 80 * kGiB, 30 * kGiB);
  EXPECT_GT(book_.Grant(kGpuA, kLessee, kGiB), id);
}

TEST_F(LeaseBookTest, ShouldDeclareTheLesseeHungPastTheDeadlineAndStopLendingThatGpu) {
  ASSERT_NE(book_.Grant(kGpuA, kLessee, 10 * kGiB), 0u);
  ASSERT_NE(book_.Grant(kGpuA, kOther, 5 * kGiB), 0u);
  EXPECT_EQ(book_.Revoke(kGpuA, 100 * kSecond), (std::vector<std::uint32_t>{kLessee, kOther}));
  book_.Published(kLessee, 3);
  book_.Published(kOther, 9);
  EXPECT_EQ(book_.Applied(kOther, 9).size(), 1u);  // kOther complies
  EXPECT_TRUE(book_.Expire(104 * kSecond).empty()) << "1 s before the deadline";
  const auto hung = book_.Expire(105 * kSecond);
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_TRUE(hung[0].hung);
  EXPECT_EQ(hung[0].lease.lessee, kLessee);
  EXPECT_EQ(book_.LentBy(kOwner), 0u) << "the owner is never kept waiting past the deadline";
  EXPECT_TRUE(book_.Stopped(kGpuA));
  book_.SetLender(kGpuA, kOwner, 80 * kGiB, 30 * kGiB);
  EXPECT_EQ(book_.Spare(kGpuA), 0u) << "stopped while the same owner holds the GPU";
  EXPECT_EQ(book_.Grant(kGpuA, kOther, kGiB), 0u);
  // A new process owns the GPU: it lends again.
  book_.SetLender(kGpuA, 4, 80 * kGiB, 30 * kGiB);
  EXPECT_EQ(book_.Spare(kGpuA), 48 * kGiB);
}

TEST_F(LeaseBookTest, ShouldFreeALesseesLeasesAndRevokeADeadOwnersOnes) {
  book_.SetLender(kGpuB, kOther, 40 * kGiB, 10 * kGiB);  // 28 GiB spare
  ASSERT_NE(book_.Grant(kGpuA, kLessee, 10 * kGiB), 0u);
  ASSERT_NE(book_.Grant(kGpuB, kLessee, 4 * kGiB), 0u);
  ASSERT_NE(book_.Grant(kGpuA, kOther, 6 * kGiB), 0u);
  // The lessee dies: its 14 GiB are free at once, no revocation is needed.
  EXPECT_TRUE(book_.ClientGone(kLessee, 10 * kSecond).empty());
  EXPECT_TRUE(book_.Active(kLessee).empty());
  EXPECT_EQ(book_.LentBy(kOwner), 6 * kGiB);
  EXPECT_EQ(book_.LentBy(kOther), 0u);
  // The owner of GPU A dies: kOther's lease on it is revoked, and GPU A lends no more.
  EXPECT_EQ(book_.ClientGone(kOwner, 20 * kSecond), std::vector<std::uint32_t>{kOther});
  EXPECT_TRUE(book_.Active(kOther).empty());
  EXPECT_EQ(book_.Spare(kGpuA), 0u);
  EXPECT_EQ(book_.Spare(kGpuB), 28 * kGiB);
  book_.Published(kOther, 2);
  EXPECT_EQ(book_.Applied(kOther, 2).size(), 1u);
  EXPECT_TRUE(book_.leases().empty());
}

// A pipeline's other device (issue 16): lent to its owner's own swaps only, and what the owner
// lends itself lowers none of its limits.
TEST_F(LeaseBookTest, ShouldLendASelfOnlyGpuToItsOwnerAloneAndNotCountItAsLent) {
  book_.SetLender(kGpuB, kOwner, 80 * kGiB, 50 * kGiB, /*self_only=*/true);
  EXPECT_EQ(book_.Spare(kGpuB), 28 * kGiB);
  EXPECT_EQ(book_.Grant(kGpuB, kLessee, kGiB), 0u) << "another client";
  const std::uint64_t own = book_.Grant(kGpuB, kOwner, 4 * kGiB);
  ASSERT_NE(own, 0u);
  EXPECT_EQ(book_.LentOn(kGpuB), 4 * kGiB);
  EXPECT_EQ(book_.LentBy(kOwner), 0u);
  ASSERT_NE(book_.Grant(kGpuA, kLessee, 2 * kGiB), 0u);
  EXPECT_EQ(book_.LentBy(kOwner), 2 * kGiB) << "only its GPU lent to others";
  EXPECT_EQ(book_.Active(kOwner).size(), 1u);
}

}  // namespace
}  // namespace chameleon::daemon
