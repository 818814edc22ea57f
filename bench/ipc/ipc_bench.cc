// Benchmarks of the shim <-> daemon protocol. Run:
//   build/bin/ipc_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
// Targets (issue 2): BM_RingPush <= 10 ns median and <= 3x BM_StoreBaseline; BM_RingPushPop
// >= 50 M records/s.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/segment.h"

namespace chameleon::ipc {
namespace {

// The record the shim pushes per kernel launch: a launch with two tensor references.
struct Launch {
  LaunchRecord fixed;
  std::uint64_t tensors[2];
};
constexpr Launch kLaunch{{kFirstKernelToken, 2, 0, 0x7f00}, {11, 12}};
constexpr std::size_t kRecordBytes = AlignRecord(sizeof(RecordHeader) + sizeof(Launch));

// Pushes between drains: fewer than the default 4 MiB ring holds, so no push is ever refused,
// and many enough that pausing the timer costs nothing per push.
constexpr std::int64_t kChunk = (SegmentGeometry{}.ring_capacity / kRecordBytes) * 9 / 10;

Segment MakeSegment() {
  Segment segment;
  if (Segment::Create(SegmentGeometry{}, &segment) != SegmentError::kOk) std::abort();
  return segment;
}

void BM_RingPush(benchmark::State& state) {
  Segment segment = MakeSegment();
  EventRingProducer producer = segment.ring_producer();
  EventRingConsumer consumer = segment.ring_consumer();
  std::int64_t drops = 0, since_drain = 0;
  for (auto _ : state) {
    const PushResult r =
        producer.Push2(RecordType::kLaunch, 0, &kLaunch.fixed, sizeof(kLaunch.fixed),
                       kLaunch.tensors, sizeof(kLaunch.tensors));
    drops += r != PushResult::kOk;
    if (++since_drain == kChunk) {
      state.PauseTiming();
      consumer.Drain([](const RecordView&) {}, ~std::size_t{0}, 0, ~0ull);
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  state.counters["drops"] = static_cast<double>(drops);
  state.SetItemsProcessed(state.iterations());
}

// The same 40 bytes written with plain stores into a buffer of the same size, same drain cadence.
void BM_StoreBaseline(benchmark::State& state) {
  const std::size_t capacity = SegmentGeometry{}.ring_capacity;
  std::vector<std::uint8_t> buffer(capacity);
  const RecordHeader header_bytes_source{};
  std::uint64_t header_word;
  std::memcpy(&header_word, &header_bytes_source, sizeof(header_word));
  header_word |= std::uint64_t{kRecordBytes} | (std::uint64_t{1} << 32);
  std::size_t position = 0;
  std::int64_t since_drain = 0;
  for (auto _ : state) {
    std::uint8_t* p = buffer.data() + position;
    std::memcpy(p, &header_word, sizeof(header_word));
    std::memcpy(p + sizeof(header_word), &kLaunch, sizeof(kLaunch));
    position += kRecordBytes;
    if (position + kRecordBytes > capacity) position = 0;
    benchmark::ClobberMemory();
    if (++since_drain == kChunk) {
      state.PauseTiming();
      std::memset(buffer.data(), 0, capacity);  // what the consumer's zeroing does
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  state.SetItemsProcessed(state.iterations());
}

// Producer here, consumer on its own thread; a full ring is retried (counted as full_retries),
// so every record pushed is also popped. Each side yields when it cannot make progress: on an
// oversubscribed machine a spinning side would otherwise burn the other's time slice.
// items_per_second uses this thread's CPU time (Google Benchmark's default); compare wall time.
void BM_RingPushPop(benchmark::State& state) {
  Segment segment = MakeSegment();
  EventRingProducer producer = segment.ring_producer();
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> popped{0};
  std::thread consumer_thread([&] {
    EventRingConsumer consumer = segment.ring_consumer();
    std::uint64_t n = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      const std::size_t got = consumer.Drain(
          [](const RecordView& v) { benchmark::DoNotOptimize(v.payload.data()); }, 4096, 0, ~0ull);
      if (got == 0) std::this_thread::yield();  // 2 cores shared with builds: let the producer run
      n += got;
    }
    n += consumer.Drain([](const RecordView&) {}, ~std::size_t{0}, 0, ~0ull);
    popped.store(n);
  });
  std::int64_t full_retries = 0;
  for (auto _ : state) {
    while (producer.Push2(RecordType::kLaunch, 0, &kLaunch.fixed, sizeof(kLaunch.fixed),
                          kLaunch.tensors, sizeof(kLaunch.tensors)) != PushResult::kOk) {
      ++full_retries;
      std::this_thread::yield();  // let the consumer run if it shares this core
    }
  }
  stop.store(true);
  consumer_thread.join();
  state.counters["full_retries"] = static_cast<double>(full_retries);
  state.counters["lost"] = static_cast<double>(state.iterations()) - static_cast<double>(popped);
  state.SetItemsProcessed(state.iterations());
}

// A 4 KiB policy, as in the mailbox tests.
std::vector<std::uint8_t> PolicyBlob() {
  Policy p;
  p.summary.generation = 1;
  p.entries.resize(71);
  for (std::size_t i = 0; i < p.entries.size(); ++i) p.entries[i].match_key = i;
  std::vector<std::uint8_t> blob;
  EncodePolicy(p, &blob);
  return blob;
}

void BM_MailboxPublish(benchmark::State& state) {
  Segment segment = MakeSegment();
  PolicyMailboxWriter writer = segment.mailbox_writer();
  const std::vector<std::uint8_t> blob = PolicyBlob();
  for (auto _ : state) {
    if (writer.Publish(blob) != PublishResult::kOk) state.SkipWithError("publish refused");
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(blob.size()));
}

// One Poll per iteration while a writer thread publishes continuously.
void BM_MailboxRead(benchmark::State& state) {
  Segment segment = MakeSegment();
  const std::vector<std::uint8_t> blob = PolicyBlob();
  std::atomic<bool> stop{false};
  std::thread writer_thread([&] {
    PolicyMailboxWriter writer = segment.mailbox_writer();
    while (!stop.load(std::memory_order_relaxed)) writer.Publish(blob);
  });
  PolicyMailboxReader reader = segment.mailbox_reader();
  std::int64_t seen = 0;
  for (auto _ : state) seen += reader.Poll() == ReadResult::kNew;
  stop.store(true);
  writer_thread.join();
  state.counters["generations_seen"] = static_cast<double>(seen);
  state.counters["torn"] = static_cast<double>(reader.torn_reads());
}

BENCHMARK(BM_StoreBaseline);
BENCHMARK(BM_RingPush);
BENCHMARK(BM_RingPushPop);
BENCHMARK(BM_MailboxPublish);
BENCHMARK(BM_MailboxRead);

}  // namespace
}  // namespace chameleon::ipc

BENCHMARK_MAIN();
