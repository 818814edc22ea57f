// Reader speed on the largest shared trace (ResNet, 14,391 nodes), with its baselines in the
// same run: inflating alone, and inflating + a plain nlohmann DOM parse (what any reader pays).
#include <benchmark/benchmark.h>

#include <nlohmann/json.hpp>

#include "chameleon/trace/kineto.h"
#include "chameleon/trace/reader.h"
#include "chameleon/trace/workload.h"

namespace {

using namespace chameleon::trace;

const std::string kTraces = std::string(CHAMELEON_TRACES_DIR) + "/";
const std::string kLargest = kTraces + "resnet_1gpu_et.json.gz";

void SetBytes(benchmark::State& state) {
  static const std::size_t bytes = ReadMaybeGzip(kLargest).size();
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["json_MB"] = static_cast<double>(bytes) / 1e6;
}

void BM_BaselineGunzip(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadMaybeGzip(kLargest));
  SetBytes(state);
}
BENCHMARK(BM_BaselineGunzip)->Unit(benchmark::kMillisecond);

void BM_BaselineGunzipJsonParse(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(ReadMaybeGzip(kLargest)));
  SetBytes(state);
}
BENCHMARK(BM_BaselineGunzipJsonParse)->Unit(benchmark::kMillisecond);

void BM_ReadTrace(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(ReadTrace(kLargest));
  SetBytes(state);
}
BENCHMARK(BM_ReadTrace)->Unit(benchmark::kMillisecond);

void BM_ReadTraceBuildWorkload(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(BuildWorkload(ReadTrace(kLargest)));
  SetBytes(state);
}
BENCHMARK(BM_ReadTraceBuildWorkload)->Unit(benchmark::kMillisecond);

void BM_MegatronWithKinetoJoin(benchmark::State& state) {
  for (auto _ : state) {
    const Trace t = ReadTrace(kTraces + "megatron_et_0.json.gz");
    Workload w = BuildWorkload(t);
    benchmark::DoNotOptimize(JoinKineto(t, kTraces + "megatron_kineto_0.json.gz", &w));
  }
}
BENCHMARK(BM_MegatronWithKinetoJoin)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
