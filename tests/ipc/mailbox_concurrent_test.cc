// The policy mailbox with a writer publishing continuously while a reader polls: the reader
// must never accept a torn policy and must end on the final generation.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <random>
#include <thread>

#include "chameleon/ipc/policy_blob.h"
#include "test_util.h"

namespace chameleon::ipc {
namespace {

// 32 + 16 + 72 + 16 + 70 * 56 + 16 + 3 * 8 = 4096 bytes: a 4 KiB policy whose every entry names
// its template (three excluded keys fill the last bytes).
constexpr std::size_t kEntries = 70;
// Generation g publishes template g % kTemplates, pre-encoded so that the writer does nothing but
// publish: fast enough to lap the reader's slot mid-copy, which is what tears copies.
constexpr std::uint64_t kTemplates = 64;

std::vector<std::uint8_t> PolicyFor(std::uint64_t generation) {
  Policy p;
  p.summary.generation = generation;
  p.summary.iteration_ops = generation * 3;
  p.entries.resize(kEntries);
  for (std::size_t i = 0; i < kEntries; ++i) {
    p.entries[i].match_key = generation * 1000 + i;
    p.entries[i].bytes = generation;
  }
  p.excluded = {1, 2, 3};
  std::vector<std::uint8_t> blob;
  EncodePolicy(p, &blob);
  return blob;
}

// True when the decoded policy is exactly what PolicyFor(generation) encoded.
bool Consistent(const Policy& p, std::uint64_t generation) {
  if (p.summary.generation != generation || p.summary.iteration_ops != generation * 3 ||
      p.entries.size() != kEntries) {
    return false;
  }
  for (std::size_t i = 0; i < kEntries; ++i) {
    if (p.entries[i].match_key != generation * 1000 + i || p.entries[i].bytes != generation) {
      return false;
    }
  }
  return true;
}

// The writer publishes continuously until the reader has accepted `target` generations (or two
// seconds passed), then stops; the reader must then reach the writer's last generation. How many
// generations the reader sees is reported, not asserted (it depends on scheduling).
TEST(MailboxConcurrentTest, ShouldNeverAcceptATornPolicyAndEndOnTheFinalGeneration) {
  const std::uint64_t target = 1000 / testing::kScale;
  std::vector<std::vector<std::uint8_t>> templates;
  for (std::uint64_t t = 0; t < kTemplates; ++t) templates.push_back(PolicyFor(t));
  ASSERT_EQ(templates[1].size(), 4096u);
  Segment segment;
  ASSERT_EQ(Segment::Create(SegmentGeometry{4096, 4096, 4096}, &segment), SegmentError::kOk);
  std::latch start(2);
  std::atomic<bool> enough{false};
  std::atomic<std::uint64_t> final_generation{0};
  std::thread writer_thread([&] {
    PolicyMailboxWriter writer = segment.mailbox_writer();
    std::minstd_rand rng(7);
    start.arrive_and_wait();
    while (!enough.load(std::memory_order_relaxed)) {
      if (writer.Publish(templates[(writer.generation() + 1) % kTemplates]) != PublishResult::kOk) {
        break;
      }
      // A random gap of 0 to ~1 us: back-to-back publishes lap the reader's slot mid-copy
      // (tears), longer gaps let whole copies through; the mix exercises both.
      for (std::uint32_t spin = rng() % 1024; spin > 0; --spin) {
        if (enough.load(std::memory_order_relaxed)) break;
      }
    }
    final_generation.store(writer.generation(), std::memory_order_release);
  });
  PolicyMailboxReader reader = segment.mailbox_reader();
  std::uint64_t accepted = 0, rejected = 0, previous = 0, backwards = 0;
  start.arrive_and_wait();
  const std::uint64_t started = MonotonicNowNs();
  const std::uint64_t enough_by = started + 2ull * 1000 * 1000 * 1000;  // bounded on a busy host
  const std::uint64_t deadline = started + 60ull * 1000 * 1000 * 1000;
  while (MonotonicNowNs() < deadline) {
    const std::uint64_t last = final_generation.load(std::memory_order_acquire);
    if (last != 0 && reader.generation() == last) break;
    if (reader.Poll() != ReadResult::kNew) continue;
    Policy p;
    const bool ok = DecodePolicy(reader.blob(), &p) == BlobError::kOk &&
                    Consistent(p, reader.generation() % kTemplates);
    ok ? ++accepted : ++rejected;
    backwards += reader.generation() <= previous;
    previous = reader.generation();
    if (accepted >= target || MonotonicNowNs() > enough_by) {
      enough.store(true, std::memory_order_relaxed);
    }
  }
  enough.store(true);
  writer_thread.join();
  EXPECT_EQ(rejected, 0u);
  EXPECT_EQ(backwards, 0u);
  EXPECT_GE(accepted, 1u);
  EXPECT_EQ(reader.generation(), final_generation.load());
  RecordProperty("generations_seen", std::to_string(accepted));
  RecordProperty("generations_published", std::to_string(final_generation.load()));
  RecordProperty("torn_reads", std::to_string(reader.torn_reads()));
}

}  // namespace
}  // namespace chameleon::ipc
