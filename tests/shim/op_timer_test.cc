// OpTimer (shim/src/op_timer.h) on a fake driver whose events take the time of a hand-moved
// clock: which ops a detailed iteration times, in which order they come out, and what it costs
// in events.
#include "op_timer.h"

#include <gtest/gtest.h>

#include <map>

namespace chameleon::shim {
namespace {

// The fake device: one clock (ns) the test moves; an event records the clock when recorded.
struct FakeDevice {
  std::uint64_t now_ns = 0;
  std::map<std::uintptr_t, std::uint64_t> recorded;
  std::uintptr_t next = 1;
  int created = 0;
  int synchronized = 0;
};
FakeDevice* g_device = nullptr;

CUresult Create(CUevent* e, unsigned int) {
  ++g_device->created;
  *e = reinterpret_cast<CUevent>(g_device->next++);
  return CUDA_SUCCESS;
}
CUresult Record(CUevent e, CUstream) {
  g_device->recorded[reinterpret_cast<std::uintptr_t>(e)] = g_device->now_ns;
  return CUDA_SUCCESS;
}
CUresult Synchronize(CUevent) {
  ++g_device->synchronized;
  return CUDA_SUCCESS;
}
CUresult Elapsed(float* ms, CUevent a, CUevent b) {
  const auto at = g_device->recorded.find(reinterpret_cast<std::uintptr_t>(a));
  const auto bt = g_device->recorded.find(reinterpret_cast<std::uintptr_t>(b));
  if (at == g_device->recorded.end() || bt == g_device->recorded.end()) {
    return CUDA_ERROR_INVALID_HANDLE;
  }
  *ms = static_cast<float>(static_cast<double>(bt->second - at->second) / 1e6);
  return CUDA_SUCCESS;
}

class OpTimerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_device = &device_;
    aux_.event_create = Create;
    aux_.event_record = Record;
    aux_.event_synchronize = Synchronize;
    aux_.event_elapsed_time = Elapsed;
    timer_.Configure(&aux_);
  }
  void TearDown() override { g_device = nullptr; }

  /// One op of `ns` on the fake device, pushed as detailed op `ordinal`.
  void Op(std::uint32_t ordinal, std::uint64_t ns) {
    const std::uint64_t h = timer_.Start(stream_);
    device_.now_ns += ns;
    timer_.Stop(h, ordinal, stream_);
  }

  FakeDevice device_;
  DriverAux aux_;
  OpTimer timer_;
  CUstream stream_ = nullptr;
};

TEST_F(OpTimerTest, ShouldReportEachDetailedOpsOwnTimeInOrdinalOrder) {
  timer_.Open();
  EXPECT_TRUE(timer_.armed());
  Op(0, 2'000'000);
  device_.now_ns += 700'000;  // a gap between ops (a swap-in wait, a launch gap) is no op's time
  Op(1, 500'000);
  Op(2, 40'000);
  timer_.Close();
  EXPECT_FALSE(timer_.armed());
  const std::vector<ipc::OpTime> times = timer_.Collect();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].op, 0u);
  EXPECT_NEAR(times[0].device_ns, 2'000'000, 2);
  EXPECT_EQ(times[1].op, 1u);
  EXPECT_NEAR(times[1].device_ns, 500'000, 1);
  EXPECT_EQ(times[2].op, 2u);
  EXPECT_NEAR(times[2].device_ns, 40'000, 1);
  EXPECT_GE(device_.synchronized, 1);
}

TEST_F(OpTimerTest, ShouldTimeNothingOutsideADetailedIteration) {
  EXPECT_FALSE(timer_.armed());
  EXPECT_EQ(timer_.Start(stream_), 0u);
  EXPECT_TRUE(timer_.Collect().empty());
  EXPECT_EQ(device_.created, 0);
}

TEST_F(OpTimerTest, ShouldForgetAnOpWhoseRecordWasNotADetailedOne) {
  timer_.Open();
  Op(OpTimer::kNotDetailed, 1000);
  Op(0, 3000);
  timer_.Close();
  const std::vector<ipc::OpTime> times = timer_.Collect();
  ASSERT_EQ(times.size(), 1u);
  EXPECT_EQ(times[0].op, 0u);
}

TEST_F(OpTimerTest, ShouldCountTheBoundaryOpStoppedAfterTheIterationClosed) {
  // The boundary op's push closes the iteration before the op path stops its timer.
  timer_.Open();
  Op(0, 1000);
  const std::uint64_t h = timer_.Start(stream_);
  device_.now_ns += 5000;
  timer_.Close();
  timer_.Stop(h, 1, stream_);
  const std::vector<ipc::OpTime> times = timer_.Collect();
  ASSERT_EQ(times.size(), 2u);
  EXPECT_EQ(times[1].op, 1u);
  EXPECT_NEAR(times[1].device_ns, 5000, 1);
}

TEST_F(OpTimerTest, ShouldKeepTheClosedIterationApartFromOneThatStartsAtTheSameBoundary) {
  timer_.Open();
  Op(0, 1000);
  timer_.Close();
  timer_.Open();  // another detailed iteration requested at the same boundary
  Op(0, 9000);
  const std::vector<ipc::OpTime> first = timer_.Collect();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_NEAR(first[0].device_ns, 1000, 1);
  timer_.Close();
  const std::vector<ipc::OpTime> second = timer_.Collect();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_NEAR(second[0].device_ns, 9000, 1);
}

TEST_F(OpTimerTest, ShouldIgnoreAHandleOfAnIterationAlreadyCollected) {
  timer_.Open();
  const std::uint64_t h = timer_.Start(stream_);
  timer_.Close();
  EXPECT_TRUE(timer_.Collect().empty());  // its op had not stopped: not timed
  timer_.Stop(h, 0, stream_);             // late: nothing to attach it to
  EXPECT_TRUE(timer_.Collect().empty());
}

TEST_F(OpTimerTest, ShouldReuseItsEventsInTheNextDetailedIteration) {
  for (int iteration = 0; iteration < 2; ++iteration) {
    timer_.Open();
    for (std::uint32_t i = 0; i < 10; ++i) Op(i, 100);
    timer_.Close();
    EXPECT_EQ(timer_.Collect().size(), 10u);
  }
  EXPECT_EQ(device_.created, 20);  // two events per op of the first iteration, none after
}

TEST_F(OpTimerTest, ShouldTimeNothingWithoutTheEventFunctions) {
  DriverAux partial = aux_;
  partial.event_synchronize = nullptr;
  OpTimer timer;
  timer.Configure(&partial);
  timer.Open();
  EXPECT_FALSE(timer.armed());
  EXPECT_EQ(timer.Start(stream_), 0u);
  timer.Close();
  EXPECT_TRUE(timer.Collect().empty());
}

}  // namespace
}  // namespace chameleon::shim
