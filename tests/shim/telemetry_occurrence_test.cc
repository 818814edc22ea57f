// The occurrences the policy runner acts on are the ones the daemon counts: two host threads push
// ops through the real Telemetry::PushOp (its ring lock, its iteration matcher) while each op's
// ticket (epoch, occurrence) is kept; then the ring is drained as the daemon would and every
// token's records are recounted from boundary to boundary in ring order. Label `concurrent`: TSan
// runs it. An op dropped for a busy lock has no ticket and no record; every other op must have
// both, and they must agree.
#include <gtest/gtest.h>

#include <barrier>
#include <cstring>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "chameleon/ipc/event_ring.h"
#include "swap/occurrence_counter.h"
#include "telemetry.h"

namespace chameleon::shim {
namespace {

constexpr std::uint32_t kSharedToken = 7;  // both threads launch it
constexpr std::uint32_t kOwnToken[2] = {8, 9};
constexpr std::uint32_t kMarker = 5;  // the boundary signature, launched by thread 0
constexpr int kRounds = 31;
constexpr int kOpsPerRound = 96;  // each thread's ops between two markers
constexpr std::uint64_t kRingBytes = 1u << 22;

/// What one op learned from its push; `id` also travels in its record (as its one tensor id).
struct Pushed {
  std::uint64_t id = 0;
  std::uint32_t token = 0;
  swap::OccurrenceTicket ticket;
  bool boundary = false;
};

class TelemetryOccurrenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    memory_ = std::make_unique<std::uint8_t[]>(sizeof(ipc::EventRingDescriptor) + kRingBytes +
                                               alignof(ipc::EventRingDescriptor));
    void* p = memory_.get();
    std::size_t space =
        sizeof(ipc::EventRingDescriptor) + kRingBytes + alignof(ipc::EventRingDescriptor);
    p = std::align(alignof(ipc::EventRingDescriptor), sizeof(ipc::EventRingDescriptor) + kRingBytes,
                   p, space);
    std::memset(p, 0, sizeof(ipc::EventRingDescriptor) + kRingBytes);
    auto* descriptor = new (p) ipc::EventRingDescriptor();
    auto* data = static_cast<std::uint8_t*>(p) + sizeof(ipc::EventRingDescriptor);
    consumer_ = ipc::EventRingConsumer(descriptor, data, kRingBytes);
    telemetry_.Attach(nullptr, ipc::EventRingProducer(descriptor, data, kRingBytes), [] {});
    telemetry_.SetOccurrenceCounter(&counter_);
    telemetry_.SetBoundary({kMarker});
  }

  Pushed Push(std::uint64_t id, std::uint32_t token) {
    struct {
      ipc::LaunchRecord rec;
      std::uint64_t tensor;
    } record{};
    record.rec.token = token;
    record.rec.tensor_count = 1;
    record.tensor = id;
    Pushed p;
    p.id = id;
    p.token = token;
    BoundaryHit hit;
    std::uint32_t detailed_op = 0;
    p.boundary = telemetry_.PushOp(ipc::RecordType::kLaunch, token, 0, &record, sizeof(record),
                                   nullptr, 0, /*capture=*/false, &hit, &p.ticket, &detailed_op);
    return p;
  }

  std::unique_ptr<std::uint8_t[]> memory_;
  ipc::EventRingConsumer consumer_;
  swap::OccurrenceCounter counter_;
  Telemetry telemetry_;
};

TEST_F(TelemetryOccurrenceTest, ShouldGiveEveryOpTheOccurrenceOfItsRecordInRingOrder) {
  // Both threads push concurrently within a round; between rounds a barrier lets thread 0 push
  // the marker alone. Without the rounds a loaded machine may run one thread's ops in a burst,
  // and the matcher rightly ignores markers closer than half an iteration to the last (CI saw 4
  // boundaries of 30): the rounds keep every iteration within a factor of two of the others.
  std::vector<Pushed> pushed[2];
  std::barrier rounds(2);
  auto run = [&](int thread) {
    pushed[thread].reserve(kRounds * (kOpsPerRound + 1));
    int i = 0;
    auto push = [&](std::uint32_t token) {
      const std::uint64_t id = (static_cast<std::uint64_t>(thread + 1) << 32) | i++;
      pushed[thread].push_back(Push(id, token));
    };
    for (int round = 0; round < kRounds; ++round) {
      for (int k = 0; k < kOpsPerRound; ++k) {
        push(i % 3 == 0 ? kSharedToken : kOwnToken[thread]);
      }
      rounds.arrive_and_wait();
      if (thread == 0) push(kMarker);  // uncontended: never dropped
      rounds.arrive_and_wait();
    }
  };
  std::thread a(run, 0), b(run, 1);
  a.join();
  b.join();

  // The daemon's view: records in ring order, each token counted from the last boundary.
  std::map<std::uint64_t, const Pushed*> by_id;
  for (const auto& ops : pushed) {
    for (const Pushed& p : ops) by_id[p.id] = &p;
  }
  std::map<std::uint32_t, std::uint32_t> count;  // token -> records in this epoch
  std::uint32_t epoch = 0, boundaries = 0;
  std::size_t records = 0, mismatches = 0, unknown = 0;
  while (consumer_.Drain(
             [&](const ipc::RecordView& v) {
               ASSERT_EQ(v.type, ipc::RecordType::kLaunch);
               ASSERT_EQ(v.payload.size(), sizeof(ipc::LaunchRecord) + sizeof(std::uint64_t));
               ipc::LaunchRecord rec{};
               std::uint64_t id = 0;
               std::memcpy(&rec, v.payload.data(), sizeof(rec));
               std::memcpy(&id, v.payload.data() + sizeof(rec), sizeof(id));
               ++records;
               const auto it = by_id.find(id);
               if (it == by_id.end() || !it->second->ticket.valid) {
                 ++unknown;  // a record must belong to a counted op
                 return;
               }
               const Pushed& p = *it->second;
               const std::uint32_t occurrence = count[rec.token]++;
               if (p.token != rec.token || p.ticket.epoch != epoch ||
                   p.ticket.occurrence != occurrence) {
                 ++mismatches;
               }
               if (p.boundary) {  // the daemon's boundary: this op ends the epoch
                 ++epoch;
                 ++boundaries;
                 count.clear();
               }
             },
             1u << 20, 0, ~0ull) > 0) {
  }
  std::size_t counted = 0;
  for (const auto& ops : pushed) {
    for (const Pushed& p : ops) counted += p.ticket.valid ? 1 : 0;
  }
  EXPECT_EQ(unknown, 0u);
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(records, counted);  // no counted op without a record, no record without a ticket
  EXPECT_EQ(telemetry_.dropped(),
            pushed[0].size() + pushed[1].size() - counted);  // busy-lock drops only
  // A marker is rejected only when busy-lock drops shrank its iteration below half the last
  // one: most of the 31 must be boundaries, so the epochs above were really exercised.
  EXPECT_GE(boundaries, 10u);
  EXPECT_EQ(counter_.epoch(), boundaries);
}

}  // namespace
}  // namespace chameleon::shim
