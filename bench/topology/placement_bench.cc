// Time and quality of node placement. Quality is relative to the greedy answer on the same
// instance (no exhaustive optimum exists at these sizes; the 100 small instances of
// tests/topology/node_placement_search_test.cc compare with it):
//   BM_Greedy/<gpus>/<clients>:  Alg. 3 by seconds per byte, plus one evaluation
//   BM_Genetic/<gpus>/<clients>: PlaceNode's default GA (population 32, 100 generations, ω 0.25)
//                                started from greedy; `fitness_vs_greedy` and `time_vs_greedy`
//                                (predicted node iteration time) below 1 are gains
//   BM_Random/<gpus>/<clients>:  random search with the GA's number of evaluations
// Node-sized: 8 GPUs on an NVSwitch, 2 NUMA nodes, 8-64 clients (several per GPU). Large
// synthetic: 32 GPUs behind 4 NUMA nodes, 256 clients.
#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>
#include <utility>

#include "chameleon/topology/node_placement.h"
#include "chameleon/topology/placement_baselines.h"

namespace chameleon::topology {
namespace {

constexpr std::uint64_t kGiB = 1ull << 30;
constexpr std::uint64_t kQuantum = kGiB / 2;
constexpr double kNvlink = 370e9;  // B/s per direction (H200 SXM peer copy)
constexpr double kPcie = 46.8e9;   // device <-> host
constexpr double kSocket = 40e9;   // between NUMA nodes

struct Instance {
  Topology topo;
  std::vector<SwapDemand> demands;
  std::vector<Helper> helpers;
  double greedy_fitness = 0;
  double greedy_time = 0;
};

// `gpus` GPUs on one NVSwitch, spread evenly over `numa` NUMA nodes joined in a ring.
Topology Node(int gpus, int numa) {
  Topology t;
  for (int g = 0; g < gpus; ++g) t.AddPlace({"gpu" + std::to_string(g), PlaceKind::kGpu, 0, 0});
  for (int n = 0; n < numa; ++n) {
    t.AddPlace({"numa" + std::to_string(n), PlaceKind::kNumaNode, 0, 0});
  }
  const int sw = t.AddPlace({"nvswitch", PlaceKind::kOther, 0, 0});
  for (int g = 0; g < gpus; ++g) {
    t.AddDuplex(g, gpus + g * numa / gpus, kPcie);
    t.AddDuplex(g, sw, kNvlink);
  }
  for (int n = 0; n + 1 < numa; ++n) t.AddDuplex(gpus + n, gpus + n + 1, kSocket);
  if (numa > 2) t.AddDuplex(gpus, gpus + numa - 1, kSocket);
  t.Finalize();
  return t;
}

// Half the GPUs host the clients (1-8 GiB of overflow each, windows up to half an iteration);
// the other half lend 4-24 GiB each; every NUMA node has free memory enough for all of them.
Instance Make(int gpus, int clients, std::uint64_t seed) {
  Rng rng(seed);
  const int numa = gpus >= 16 ? 4 : 2;
  Instance in{Node(gpus, numa), {}, {}, 0, 0};
  for (int c = 0; c < clients; ++c) {
    const int gpu = 2 * rng.Index(static_cast<std::size_t>(gpus / 2));
    const double iteration = 0.2 + 0.8 * rng.Unit();
    in.demands.push_back(
        {gpu, (1 + rng.Below(16)) * kQuantum, 0.5 * iteration * rng.Unit(), iteration});
  }
  for (int g = 1; g < gpus; g += 2) in.helpers.push_back({g, (8 + rng.Below(41)) * kQuantum});
  for (int n = 0; n < numa; ++n) {
    // 64-512 GiB on a node; 256-1024 GiB on the large ones, whose 256 clients ask ~1 TiB.
    const std::uint64_t units = gpus >= 16 ? 512 + rng.Below(1537) : 128 + rng.Below(897);
    in.helpers.push_back({gpus + n, units * kQuantum});
  }
  NodePlacementOptions o;
  o.genetic = false;
  const NodePlacement greedy = PlaceNode(in.topo, in.demands, in.helpers, o);
  in.greedy_fitness = greedy.fitness;
  in.greedy_time = greedy.predicted_iteration_s;
  return in;
}

constexpr int kSeeds = 10;

const Instance& Get(int gpus, int clients, int seed) {
  static std::map<std::tuple<int, int, int>, std::unique_ptr<Instance>> cache;
  auto& slot = cache[{gpus, clients, seed}];
  if (!slot) slot = std::make_unique<Instance>(Make(gpus, clients, 1000u * clients + seed));
  return *slot;
}

NodePlacementOptions GeneticOptionsFor(std::uint64_t seed) {
  NodePlacementOptions o;
  o.quantum = kQuantum;
  o.genetic_options.seed = seed;
  return o;
}

void BM_Greedy(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int clients = static_cast<int>(state.range(1));
  NodePlacementOptions o;
  o.genetic = false;
  int i = 0;
  for (auto _ : state) {
    const Instance& in = Get(gpus, clients, i++ % kSeeds);
    benchmark::DoNotOptimize(PlaceNode(in.topo, in.demands, in.helpers, o));
  }
}

void BM_Genetic(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int clients = static_cast<int>(state.range(1));
  int i = 0;
  double fitness = 0, time = 0, evaluations = 0;
  for (auto _ : state) {
    const Instance& in = Get(gpus, clients, i % kSeeds);
    const NodePlacement p = PlaceNode(in.topo, in.demands, in.helpers, GeneticOptionsFor(i + 1));
    fitness += p.fitness / in.greedy_fitness;
    time += p.predicted_iteration_s / in.greedy_time;
    evaluations += static_cast<double>(p.evaluations);
    ++i;
  }
  state.counters["fitness_vs_greedy"] = fitness / i;
  state.counters["time_vs_greedy"] = time / i;
  state.counters["evaluations"] = evaluations / i;
}

void BM_Random(benchmark::State& state) {
  const int gpus = static_cast<int>(state.range(0));
  const int clients = static_cast<int>(state.range(1));
  int i = 0;
  double fitness = 0;
  for (auto _ : state) {
    const Instance& in = Get(gpus, clients, i % kSeeds);
    state.PauseTiming();  // the GA's evaluation count, so the comparison holds it equal
    const std::size_t budget =
        PlaceNode(in.topo, in.demands, in.helpers, GeneticOptionsFor(i + 1)).evaluations;
    state.ResumeTiming();
    const BaselineResult r =
        RandomSearch(in.topo, in.demands, in.helpers, kQuantum, in.greedy_time, budget, i + 1);
    fitness += r.best_fitness / in.greedy_fitness;
    ++i;
  }
  state.counters["fitness_vs_greedy"] = fitness / i;
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int clients : {8, 16, 32, 64}) b->Args({8, clients});
  b->Args({32, 256});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_Greedy)->Apply(Sizes);
BENCHMARK(BM_Genetic)->Apply(Sizes)->Iterations(kSeeds);
BENCHMARK(BM_Random)->Apply(Sizes)->Iterations(kSeeds);

}  // namespace
}  // namespace chameleon::topology

BENCHMARK_MAIN();
