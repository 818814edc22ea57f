#include "chameleon/daemon/profile_recorder.h"

#include <gtest/gtest.h>

#include <memory>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/segment.h"

namespace chameleon::daemon {
namespace {

class ProfileRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ipc::SegmentGeometry geometry;
    geometry.ring_capacity = 1u << 16;
    ASSERT_EQ(ipc::Segment::Create(geometry, &segment_), ipc::SegmentError::kOk);
    header_ = segment_.header();
    who_.id = 3;
    who_.pid = 1234;
    recorder_ = std::make_unique<ProfileRecorder>(who_, header_, &live_, &names_);
  }

  bool DetailRequested() const {
    return (header_->control_flags.load() & ipc::kControlDetailedIteration) != 0;
  }

  /// A detailed iteration of two launches, the second using allocation 9 made within it.
  void CollectTwoOps() {
    const std::uint64_t first[] = {7};
    ASSERT_TRUE(recorder_->Accepts(true));
    recorder_->AddOp(20, first, ipc::kNoAllocation);
    recorder_->AddAlloc(9, 1024, true, /*device=*/0, /*detailed=*/true);
    const std::uint64_t second[] = {7, 9};
    recorder_->AddOp(21, second, ipc::kNoAllocation);
  }

  ipc::Segment segment_;
  ipc::SegmentHeader* header_ = nullptr;
  ClientIdentity who_;
  std::unordered_map<std::uint64_t, LiveAllocation> live_{{7, {4096, true}}};
  std::unordered_map<std::uint32_t, std::string> names_{{20, "gemm"}};
  std::unique_ptr<ProfileRecorder> recorder_;
};

TEST_F(ProfileRecorderTest, RestartAsksTheShimForADetailedIteration) {
  EXPECT_FALSE(recorder_->Accepts(true));
  recorder_->Restart();
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kRequested);
  EXPECT_TRUE(DetailRequested());
  EXPECT_EQ(header_->detail_request_seq.load(), 1u);
  EXPECT_FALSE(recorder_->Accepts(false));  // only detailed records belong to the profile
  EXPECT_TRUE(recorder_->Accepts(true));
}

TEST_F(ProfileRecorderTest, TheClosingMarkMakesAnUntimedProfile) {
  recorder_->Restart();
  CollectTwoOps();
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kCollecting);
  recorder_->OnMark(5);
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kDone);
  EXPECT_FALSE(DetailRequested());
  ASSERT_NE(recorder_->profile(), nullptr);
  EXPECT_EQ(recorder_->profile()->ops.size(), 2u);
  EXPECT_EQ(recorder_->profile()->ops[0].name, "gemm");
  EXPECT_EQ(recorder_->profile()->tensors.size(), 2u);  // 7 (live before) and 9
  EXPECT_TRUE(recorder_->fresh());
  EXPECT_FALSE(recorder_->timed());
  EXPECT_EQ(recorder_->profile()->source, "chameleond client 3 pid 1234");
}

TEST_F(ProfileRecorderTest, OpTimesSentBeforeTheClosingMarkTimeTheProfilesOps) {
  recorder_->Restart();
  CollectTwoOps();
  // Op 1 measured, op 0 not; an entry past the iteration's ops (untrusted) changes nothing.
  const ipc::OpTime times[] = {{1, 250'000}, {7, 1'000'000}};
  recorder_->AddOpTimes(times, /*detailed=*/false);  // not of the detailed iteration: ignored
  ASSERT_EQ(recorder_->state(), ProfileRecorder::State::kCollecting);
  recorder_->OnMark(5);
  ASSERT_NE(recorder_->profile(), nullptr);
  EXPECT_EQ(recorder_->profile()->ops[1].device_s, 0.0);

  recorder_->Restart();
  CollectTwoOps();
  recorder_->AddOpTimes(times, /*detailed=*/true);
  recorder_->OnMark(7);
  ASSERT_NE(recorder_->profile(), nullptr);
  ASSERT_EQ(recorder_->profile()->ops.size(), 2u);
  EXPECT_EQ(recorder_->profile()->ops[0].device_s, 0.0);
  EXPECT_DOUBLE_EQ(recorder_->profile()->ops[1].device_s, 250e-6);
  // Timing the profile later keeps the op times.
  recorder_->Time(0.01, "device");
  EXPECT_DOUBLE_EQ(recorder_->profile()->ops[1].device_s, 250e-6);
}

TEST_F(ProfileRecorderTest, AnOpOutsideTheDetailedIterationAlsoEndsIt) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OpOutside(4);
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kDone);
  // It began at boundary 4: interval 4 is the detailed one and does not time the profile.
  recorder_->SampleInterval(4, 1, 0.1, false);
  recorder_->SampleInterval(5, 1, 0.2, false);
  EXPECT_FALSE(recorder_->timed());
  recorder_->SampleInterval(6, 1, 0.3, false);
  EXPECT_TRUE(recorder_->timed());
  EXPECT_DOUBLE_EQ(recorder_->profile()->iteration_s, 0.2);  // the best of two
  EXPECT_EQ(recorder_->clock(), "device");
}

TEST_F(ProfileRecorderTest, DroppedRecordsAskAgainAndFiveLossesGiveUp) {
  recorder_->Restart();
  for (std::uint32_t attempt = 1; attempt <= 5; ++attempt) {
    EXPECT_EQ(header_->detail_request_seq.load(), attempt);
    CollectTwoOps();
    header_->records_dropped.fetch_add(1);  // the ring overflowed during the iteration
    recorder_->OnMark(10 + attempt);
  }
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kIdle);
  EXPECT_EQ(header_->detail_request_seq.load(), 5u);
  EXPECT_EQ(recorder_->profile(), nullptr);
  EXPECT_FALSE(recorder_->fresh());
  EXPECT_EQ(recorder_->progress(), 4u * 5u);  // five attempts, idle, untimed
}

TEST_F(ProfileRecorderTest, TimingIgnoresIntervalsUnderTheOldPolicyOrAfterACandidate) {
  recorder_->Restart();
  recorder_->SetTimingFloor(7);
  CollectTwoOps();
  recorder_->OnMark(3);                         // began at boundary 2
  recorder_->SampleInterval(3, 6, 0.1, false);  // under the old policy
  recorder_->SampleInterval(3, 7, 0.5, true);   // a candidate is published already
  EXPECT_FALSE(recorder_->timed());
  recorder_->SampleInterval(3, 7, 0.5, false);
  recorder_->SampleInterval(4, 7, 0.4, false);
  EXPECT_TRUE(recorder_->timed());
  EXPECT_DOUBLE_EQ(recorder_->profile()->iteration_s, 0.4);
}

TEST_F(ProfileRecorderTest, MarksAreCountedUntilTheProfileIsTimedInHostTime) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(3);
  recorder_->OnMark(4);
  recorder_->OnMark(5);
  EXPECT_EQ(recorder_->marks_since_detail(), 2u);
  recorder_->Time(0.75, "host");
  EXPECT_TRUE(recorder_->timed());
  EXPECT_EQ(recorder_->clock(), "host");
  recorder_->OnMark(6);
  EXPECT_EQ(recorder_->marks_since_detail(), 2u);
}

TEST_F(ProfileRecorderTest, RestartForgetsFreshnessButKeepsTheLastProfile) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(3);
  recorder_->Restart();
  EXPECT_FALSE(recorder_->fresh());
  EXPECT_NE(recorder_->profile(), nullptr);
  EXPECT_EQ(header_->detail_request_seq.load(), 2u);
}

TEST_F(ProfileRecorderTest, ShouldDropTheProfileAndItsFreshnessWhenTheBoundaryChanges) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(5);
  recorder_->Time(0.25, "device");
  ASSERT_TRUE(recorder_->fresh());
  ASSERT_TRUE(recorder_->timed());
  ASSERT_NE(recorder_->profile(), nullptr);
  recorder_->Forget();
  EXPECT_FALSE(recorder_->fresh());
  EXPECT_FALSE(recorder_->timed());
  EXPECT_EQ(recorder_->profile(), nullptr);
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kIdle);
  EXPECT_TRUE(recorder_->clock().empty());
  // The next stable sequence records afresh (a new request, attempts counted from one).
  recorder_->Restart();
  EXPECT_EQ(recorder_->state(), ProfileRecorder::State::kRequested);
  EXPECT_EQ(header_->detail_request_seq.load(), 2u);
}

TEST_F(ProfileRecorderTest, ShouldCallOffADetailedIterationInProgressWhenTheBoundaryChanges) {
  recorder_->Restart();
  CollectTwoOps();
  ASSERT_TRUE(DetailRequested());
  recorder_->Forget();
  EXPECT_FALSE(DetailRequested());
  EXPECT_FALSE(recorder_->Accepts(true));  // the old iteration's detailed ops are not recorded
  recorder_->OnMark(6);                    // nor closed into a profile
  EXPECT_EQ(recorder_->profile(), nullptr);
  EXPECT_FALSE(recorder_->fresh());
}

TEST_F(ProfileRecorderTest, ShouldTimeTheProfileWithIntervalsOfTheSameSequenceBeforeIt) {
  recorder_->NewSequence(3);  // the sequence changed: intervals from boundary 3 on are its own
  recorder_->SampleInterval(2, 5, 0.1, false);   // the old sequence's
  recorder_->SampleInterval(3, 5, 0.3, false);   // WARMUP, no swaps
  recorder_->SampleInterval(4, 4, 0.05, false);  // under a policy with swaps (below the floor)
  recorder_->SampleInterval(5, 5, 0.25, false);
  recorder_->Restart();
  recorder_->SetTimingFloor(5);
  CollectTwoOps();
  recorder_->SampleInterval(6, 5, 0.01, false);  // the detailed interval itself: never
  recorder_->OnMark(7);                          // the detailed iteration began at boundary 6
  // Two early samples (intervals 3 and 5): timed at once, with the better one.
  EXPECT_TRUE(recorder_->timed());
  EXPECT_DOUBLE_EQ(recorder_->profile()->iteration_s, 0.25);
  EXPECT_EQ(recorder_->clock(), "device");
}

TEST_F(ProfileRecorderTest, ShouldMakeTheProfileStaleWhenTheSequenceChanges) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(3);
  ASSERT_TRUE(recorder_->fresh());
  recorder_->NewSequence(9);
  EXPECT_FALSE(recorder_->fresh());
  // One early sample only: the next profile waits for a second interval after it.
  recorder_->SampleInterval(9, 1, 0.5, false);
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(11);
  EXPECT_FALSE(recorder_->timed());
  recorder_->SampleInterval(11, 1, 0.4, false);
  EXPECT_TRUE(recorder_->timed());
  EXPECT_DOUBLE_EQ(recorder_->profile()->iteration_s, 0.4);
}

}  // namespace
TEST_F(ProfileRecorderTest, AResumedUntimedProfileIsTimedByIntervalsAfterTheResume) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(3);
  const std::shared_ptr<const policy::Profile> untimed = recorder_->profile();
  recorder_->NewSequence(4);  // left before it was timed
  recorder_->Resume(untimed, 10);
  EXPECT_TRUE(recorder_->fresh());
  EXPECT_FALSE(recorder_->timed());
  recorder_->SetTimingFloor(9);
  recorder_->SampleInterval(10, 9, 0.1, false);  // the iteration that ran under another plan
  recorder_->SampleInterval(11, 8, 0.1, false);  // under an older policy
  EXPECT_FALSE(recorder_->timed());
  recorder_->SampleInterval(11, 9, 0.6, false);
  recorder_->SampleInterval(12, 9, 0.5, false);
  ASSERT_TRUE(recorder_->timed());
  EXPECT_DOUBLE_EQ(recorder_->profile()->iteration_s, 0.5);
}

TEST_F(ProfileRecorderTest, AResumedTimedProfileIsReadyAtOnce) {
  recorder_->Restart();
  CollectTwoOps();
  recorder_->OnMark(3);
  recorder_->Time(0.75, "device");
  const std::shared_ptr<const policy::Profile> timed = recorder_->profile();
  recorder_->NewSequence(4);
  recorder_->Restart();  // another sequence's detailed iteration requested meanwhile
  recorder_->Resume(timed, 10);
  EXPECT_TRUE(recorder_->fresh());
  EXPECT_TRUE(recorder_->timed());
  EXPECT_FALSE(recorder_->in_progress());
  EXPECT_EQ(recorder_->profile(), timed);
}

}  // namespace chameleon::daemon
