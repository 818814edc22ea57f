// Generation time of the swap-policy generator, with a baseline in the same run: one linear
// memory replay over the same profile (the least any generator must do).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <map>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/matcher.h"
#include "chameleon/policy/memory.h"
#include "chameleon/policy/synthetic.h"
#ifdef CHAMELEON_POLICY_BENCH_TRACES
#include "chameleon/trace/profile_builder.h"
#endif

namespace chameleon::policy {
namespace {

const Profile& Synthetic(std::uint32_t ops) {
  static std::map<std::uint32_t, Profile> cache;
  auto it = cache.find(ops);
  if (it == cache.end()) {
    SyntheticSpec spec;
    spec.layers = 24;
    spec.ops = ops;
    spec.tensors = 20'000;
    it = cache.emplace(ops, MakeTransformerProfile(spec)).first;
  }
  return it->second;
}

std::uint64_t Peak(const Profile& p) {
  const std::vector<std::uint64_t> mem = ReplayMemory(p);
  return *std::max_element(mem.begin(), mem.end());
}

// executor: the options the daemon uses for the shim's executor (2 MiB chunks, memory accounted
// when transfers are issued, redundant swaps pruned).
void RunGenerate(benchmark::State& state, const Profile& p, std::uint64_t divisor,
                 bool executor = false) {
  GeneratorOptions o;
  o.device_limit_bytes = Peak(p) / divisor;
  if (executor) {
    o.chunk_bytes = 2ull << 20;
    o.release_at_issue = true;
  }
  std::size_t swaps = 0;
  bool ok = false;
  double stall = 0;
  for (auto _ : state) {
    GenerateResult r = GeneratePlan(p, o);
    ok = r.ok();
    swaps = r.plan.swaps.size();
    stall = r.plan.predicted_stall_s;
    benchmark::DoNotOptimize(r);
  }
  state.counters["ops"] = static_cast<double>(p.ops.size());
  state.counters["tensors"] = static_cast<double>(p.tensors.size());
  state.counters["swaps"] = static_cast<double>(swaps);
  state.counters["fits"] = ok ? 1 : 0;
  state.counters["stall_s"] = stall;
}

void BM_Generate_Synthetic(benchmark::State& state) {
  RunGenerate(state, Synthetic(static_cast<std::uint32_t>(state.range(0))), 2);
}
BENCHMARK(BM_Generate_Synthetic)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

void BM_Generate_Synthetic_Executor(benchmark::State& state) {
  RunGenerate(state, Synthetic(static_cast<std::uint32_t>(state.range(0))), 2, true);
}
BENCHMARK(BM_Generate_Synthetic_Executor)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

void BM_Baseline_Replay(benchmark::State& state) {
  const Profile& p = Synthetic(static_cast<std::uint32_t>(state.range(0)));
  for (auto _ : state) {
    std::vector<std::uint64_t> mem = ReplayMemory(p);
    benchmark::DoNotOptimize(mem.data());
  }
  state.counters["ops"] = static_cast<double>(p.ops.size());
}
BENCHMARK(BM_Baseline_Replay)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

void BM_Match_Synthetic(benchmark::State& state) {
  const Profile& p = Synthetic(static_cast<std::uint32_t>(state.range(0)));
  const Matcher matcher(ComputeFeatures(p));
  for (auto _ : state) {
    std::vector<std::int32_t> match = matcher.Match(ComputeFeatures(p));
    benchmark::DoNotOptimize(match.data());
  }
}
BENCHMARK(BM_Match_Synthetic)->Arg(100'000)->Unit(benchmark::kMillisecond);

#ifdef CHAMELEON_POLICY_BENCH_TRACES
const Profile& ResNet() {
  static const Profile p =
      trace::ProfileFromTraceFile(CHAMELEON_TRACES_DIR "/resnet_1gpu_et.json.gz");
  return p;
}

void BM_Generate_ResNet(benchmark::State& state) {
  RunGenerate(state, ResNet(), static_cast<std::uint64_t>(state.range(0)));
}
BENCHMARK(BM_Generate_ResNet)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

void BM_Generate_ResNet_Executor(benchmark::State& state) {
  RunGenerate(state, ResNet(), static_cast<std::uint64_t>(state.range(0)), true);
}
BENCHMARK(BM_Generate_ResNet_Executor)->Arg(2)->Arg(3)->Unit(benchmark::kMillisecond);

void BM_Baseline_Replay_ResNet(benchmark::State& state) {
  for (auto _ : state) {
    std::vector<std::uint64_t> mem = ReplayMemory(ResNet());
    benchmark::DoNotOptimize(mem.data());
  }
}
BENCHMARK(BM_Baseline_Replay_ResNet)->Unit(benchmark::kMillisecond);
#endif

}  // namespace
}  // namespace chameleon::policy

BENCHMARK_MAIN();
