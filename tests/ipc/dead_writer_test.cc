// A writer that dies between claiming and committing a record (it faults while copying the
// payload, inside the real Push) leaves a claimed record the consumer turns into padding after
// the stuck timeout. These tests fault on purpose, so they carry no sanitizer label.
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

constexpr std::uint64_t kTimeoutNs = 1'000'000;

void DieWithSigkill(int) { raise(SIGKILL); }

// Child: three good records, then a push whose payload is unreadable, so it dies mid-record.
int DyingWriter(const Segment& segment, bool sigkill) {
  const rlimit no_core{0, 0};  // a deliberate fault should not leave a core file behind
  setrlimit(RLIMIT_CORE, &no_core);
  if (sigkill) signal(SIGSEGV, DieWithSigkill);
  EventRingProducer producer = segment.ring_producer();
  for (int i = 0; i < 3; ++i) {
    if (testing::PushLaunch(&producer, i) != PushResult::kOk) return 1;
  }
  void* unreadable = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  producer.Push(RecordType::kAlloc, 0, unreadable, sizeof(AllocRecord));
  return 2;  // not reached
}

void ExpectRepairedAfterDeath(bool sigkill) {
  Segment segment;
  ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &segment), SegmentError::kOk);
  const pid_t child = testing::ForkChild([&] { return DyingWriter(segment, sigkill); });
  const int status = testing::WaitStatus(child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), sigkill ? SIGKILL : SIGSEGV);

  EventRingConsumer consumer = segment.ring_consumer();
  std::vector<std::uint64_t> seqs;
  auto drain = [&](std::uint64_t now) {
    return consumer.Drain([&](const RecordView& v) { seqs.push_back(testing::LaunchSeq(v)); }, 100,
                          now, kTimeoutNs);
  };
  EXPECT_EQ(drain(0), 3u);  // the committed records, then the stuck claim stops the drain
  EXPECT_EQ(seqs, (std::vector<std::uint64_t>{0, 1, 2}));
  // A replacement producer on the same segment (the record after the dead one).
  EventRingProducer producer = segment.ring_producer();
  ASSERT_EQ(testing::PushLaunch(&producer, 3), PushResult::kOk);
  EXPECT_EQ(drain(kTimeoutNs / 2), 0u);  // still within the timeout
  EXPECT_EQ(consumer.repaired(), 0u);
  EXPECT_EQ(drain(kTimeoutNs + 1), 1u);
  EXPECT_EQ(seqs.back(), 3u);
  EXPECT_EQ(consumer.repaired(), 1u);
  EXPECT_EQ(consumer.last_error(), DrainError::kStuckRecordRepaired);
  EXPECT_EQ(consumer.corrupt(), 0u);
}

TEST(DeadWriterTest, ShouldTurnRecordOfWriterThatFaultedMidPushIntoPadding) {
  ExpectRepairedAfterDeath(false);
}

TEST(DeadWriterTest, ShouldTurnRecordOfWriterKilledMidPushIntoPadding) {
  ExpectRepairedAfterDeath(true);
}

}  // namespace
}  // namespace chameleon::ipc
