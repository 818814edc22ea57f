// Benchmarks of the daemon's per-iteration work, each with a baseline in the same run.
//   daemon_bench --benchmark_filter=.
// Compare/Boundary*: the work at an iteration boundary (incremental comparator: O(1)).
// Compare/Iteration*: the whole comparison cost of one iteration (every op's two probes + the
//   boundary), against Baseline/Memcmp (comparing the two token arrays, the least any
//   comparison must do) and Compare/FromScratch (the non-incremental bigram cosine).
// Drain*: records per second through a client session (validation, tracker, stage machine)
// against the bare ring consumer.
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstring>
#include <numeric>
#include <random>

#include "chameleon/daemon/bigram_similarity.h"
#include "chameleon/daemon/boundary_detector.h"
#include "chameleon/daemon/client_session.h"
#include "chameleon/daemon/metrics.h"

namespace chameleon::daemon {
namespace {

std::vector<std::uint32_t> Iteration(std::size_t ops, std::uint64_t seed) {
  // A transformer-like mix: a few hundred distinct kernels, layer blocks repeating.
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> block(64);
  for (auto& t : block) t = 16 + static_cast<std::uint32_t>(rng() % 300);
  std::vector<std::uint32_t> tokens(ops);
  for (std::size_t i = 0; i < ops; ++i) tokens[i] = block[i % block.size()] + (i / 4096) % 7;
  return tokens;
}

void CompareBoundary(benchmark::State& state) {
  const auto ops = Iteration(static_cast<std::size_t>(state.range(0)), 1);
  IterationComparator comparator;
  for (auto t : ops) comparator.Add(t);
  comparator.Finish({});
  for (auto _ : state) {
    for (auto t : ops) comparator.Add(t);
    const auto start = std::chrono::steady_clock::now();
    auto result = comparator.Finish({});
    const auto end = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(result);
    state.SetIterationTime(std::chrono::duration<double>(end - start).count());
  }
}
// The timed part is tiny and filling an iteration is not: a fixed iteration count keeps the run
// short (otherwise the framework would feed millions of iterations to reach its minimum time).
BENCHMARK(CompareBoundary)
    ->Name("Compare/Boundary")
    ->Arg(10'000)
    ->Arg(100'000)
    ->UseManualTime()
    ->Iterations(2000);

void CompareIteration(benchmark::State& state) {
  const auto ops = Iteration(static_cast<std::size_t>(state.range(0)), 1);
  IterationComparator comparator;
  for (auto t : ops) comparator.Add(t);
  comparator.Finish({});
  for (auto _ : state) {
    for (auto t : ops) comparator.Add(t);
    benchmark::DoNotOptimize(comparator.Finish({}));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(CompareIteration)->Name("Compare/Iteration")->Arg(10'000)->Arg(100'000);

void CompareFromScratch(benchmark::State& state) {
  const auto a = Iteration(static_cast<std::size_t>(state.range(0)), 1);
  auto b = a;
  b[b.size() / 2] = 7;
  for (auto _ : state) benchmark::DoNotOptimize(CompareIterations(a, b, {}));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(CompareFromScratch)->Name("Compare/FromScratch")->Arg(10'000)->Arg(100'000);

void BaselineMemcmp(benchmark::State& state) {
  const auto a = Iteration(static_cast<std::size_t>(state.range(0)), 1);
  auto b = a;
  b.back() = 7;
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])));
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BaselineMemcmp)->Name("Baseline/Memcmp")->Arg(10'000)->Arg(100'000);

void BaselineSum(benchmark::State& state) {
  const auto a = Iteration(static_cast<std::size_t>(state.range(0)), 1);
  for (auto _ : state) {
    benchmark::DoNotOptimize(std::accumulate(a.begin(), a.end(), std::uint64_t{0}));
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BaselineSum)->Name("Baseline/Sum")->Arg(10'000)->Arg(100'000);

void Detect(benchmark::State& state) {
  // Six iterations after 500 set-up ops: what the detector sees when it first succeeds.
  const auto iteration = Iteration(static_cast<std::size_t>(state.range(0)), 2);
  std::vector<std::uint32_t> tokens(500, 1);
  std::vector<std::uint32_t> marked = iteration;
  marked.front() = 5;  // a once-per-iteration op
  for (int i = 0; i < 6; ++i) tokens.insert(tokens.end(), marked.begin(), marked.end());
  for (auto _ : state) benchmark::DoNotOptimize(DetectBoundary(tokens, {}));
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(tokens.size()));
}
BENCHMARK(Detect)
    ->Name("Detect/SixIterations")
    ->Arg(1'000)
    ->Arg(10'000)
    ->Unit(benchmark::kMillisecond);

// The sessions below log their stage changes; keep the benchmark output readable.
const bool kQuiet = [] {
  spdlog::set_level(spdlog::level::warn);
  return true;
}();

constexpr std::size_t kBatch = 20'000;

/// Fills the ring with a batch of launch records (two tensors each) from a 1000-op loop.
void Fill(ipc::EventRingProducer& producer) {
  for (std::size_t i = 0; i < kBatch; ++i) {
    const std::uint32_t token = 16 + static_cast<std::uint32_t>(i % 1000 == 0 ? 0 : 1 + i % 97);
    const ipc::LaunchRecord launch{token, 2, 0, 0};
    const std::uint64_t tensors[2] = {i % 50 + 1, i % 30 + 100};
    producer.Push2(ipc::RecordType::kLaunch, 0, &launch, sizeof(launch), tensors, sizeof(tensors));
  }
}

void DrainSession(benchmark::State& state) {
  ipc::Segment segment;
  ipc::SegmentGeometry geometry;
  geometry.ring_capacity = 4u << 20;
  ipc::Segment::Create(geometry, &segment);
  auto producer = segment.ring_producer();
  segment.name_writer().Append(16, "step_start");
  static DaemonOptions options;
  options.detection.boundary_patterns = {"step_start"};
  options.drain_batch_records = kBatch;
  Metrics metrics;
  ClientIdentity identity;
  ClientSession session(identity, std::move(segment), options, &metrics, 1);
  for (auto _ : state) {
    state.PauseTiming();
    Fill(producer);
    state.ResumeTiming();
    if (session.Drain(2) != Health::kOk) state.SkipWithError("drain failed");
  }
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(DrainSession)->Name("Drain/Session");

void DrainRingOnly(benchmark::State& state) {
  ipc::Segment segment;
  ipc::SegmentGeometry geometry;
  geometry.ring_capacity = 4u << 20;
  ipc::Segment::Create(geometry, &segment);
  auto producer = segment.ring_producer();
  auto consumer = segment.ring_consumer();
  std::uint64_t sum = 0;
  for (auto _ : state) {
    state.PauseTiming();
    Fill(producer);
    state.ResumeTiming();
    consumer.Drain([&](const ipc::RecordView& r) { sum += r.payload.size(); }, kBatch, 2, 1);
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations() * kBatch);
}
BENCHMARK(DrainRingOnly)->Name("Baseline/DrainRingOnly");

}  // namespace
}  // namespace chameleon::daemon
