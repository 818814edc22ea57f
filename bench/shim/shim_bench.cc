// shim_bench: the cost the shim adds to a kernel launch and to an async allocation.
//
// Both sides call the same null driver (shim/testing/null_driver.cc, its VMM build): "Shim" goes
// through libchameleon.so, loaded here with dlopen (no LD_PRELOAD), with telemetry on: an
// in-process fake daemon accepts the shim's HELLO, so every launch becomes a ring record with its
// tensors, and the swap executor is on (the driver has the VMM entry points; the two 64 MiB
// tensors are the engine's). The ring is drained with timing paused every kDrainEvery
// iterations; the `drops` counter must read 0. The kernel has four parameters, two of them
// tracked device pointers.
//
// BM_LaunchShimPolicy: the same with a policy in force, on a second copy of the shim (its own
// globals and connection): iterations of kIterationOps launches ending with the marker kernel
// (the boundary signature), and kTriggersPerIteration entries with one anchor every ~100 ops.
// The entries name a size no tensor has, so each trigger takes the runner's slow path (lock,
// binding, counted in policy_ignored) without moving memory: what is measured is the launch
// path's check and hand-off, not the swap engine's copies. `ignored_per_iteration` must read
// kEntries (3: one per entry and iteration) and `generation` 1.
//
//   build-*/bench/shim_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
//
// A/B against another build of the shim (a baseline copy of libchameleon.so), in one process so
// that both see the same machine noise:
//   CHAMELEON_BENCH_SHIM_B=/path/libchameleon.so build-*/bin/shim_bench
//     --benchmark_enable_random_interleaving=true --benchmark_repetitions=10
//     --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/shim/shim_api.h"
#include "fake_daemon.h"

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
using AllocAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using FreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);
using AllocFn = CUresult (*)(CUdeviceptr*, size_t);

constexpr std::int64_t kDrainEvery = 1 << 16;
// The policy run: launches per iteration (the last one the marker) and trigger anchors in it.
constexpr std::int64_t kIterationOps = 1000;
constexpr std::uint32_t kEntries = 3;  // 3 anchors each (out, in, use): one every ~100 ops
const auto kKernel = reinterpret_cast<CUfunction>(0x1000);
const auto kMarker = reinterpret_cast<CUfunction>(0x2000);  // named apart by the null driver

struct Api {
  LaunchFn launch = nullptr;
  AllocAsyncFn alloc_async = nullptr;
  FreeAsyncFn free_async = nullptr;
  AllocFn alloc = nullptr;
};

/// One shim under test: its entry points, stats and two tracked 64 MiB allocations.
struct Shim {
  Api api;
  ChameleonShimGetStatsFn stats = nullptr;
  std::size_t client = 0;  ///< its connection's index in the fake daemon
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
};

struct Setup {
  chameleon::shim::testing::FakeDaemon daemon;
  Api direct;
  /// [0] this tree's shim, [1] CHAMELEON_BENCH_SHIM_B when set, [2] and [3] copies of them with
  /// a policy in force.
  Shim shims[4];
  bool ok = false;
};

template <typename Fn>
Fn Sym(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

Api Resolve(void* handle) {
  Api api;
  api.launch = Sym<LaunchFn>(handle, "cuLaunchKernel");
  api.alloc_async = Sym<AllocAsyncFn>(handle, "cuMemAllocAsync");
  api.free_async = Sym<FreeAsyncFn>(handle, "cuMemFreeAsync");
  api.alloc = Sym<AllocFn>(handle, "cuMemAlloc_v2");
  return api;
}

const char* ShimBPath() {
  const char* path = std::getenv("CHAMELEON_BENCH_SHIM_B");
  return path != nullptr && *path != '\0' ? path : nullptr;
}

// Loads one shim (a second copy from another path gets its own globals and connection) and makes
// its first tracked calls, which initialise it and connect it to the bench daemon.
bool LoadShim(Setup* s, const char* path, std::size_t index, std::size_t client) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return false;
  }
  Shim& shim = s->shims[index];
  shim.api = Resolve(handle);
  shim.stats = Sym<ChameleonShimGetStatsFn>(handle, "chameleon_shim_get_stats");
  shim.client = client;
  if (shim.api.alloc(&shim.a, 64 << 20) != CUDA_SUCCESS ||
      shim.api.alloc(&shim.b, 64 << 20) != CUDA_SUCCESS ||
      !s->daemon.WaitForClients(client + 1, 5000)) {
    std::fprintf(stderr, "shim %s did not connect to the bench daemon\n", path);
    return false;
  }
  return true;
}

ChameleonShimStats Stats(const Shim& shim) {
  ChameleonShimStats st{};
  shim.stats(&st, sizeof(st));
  return st;
}

CUresult LaunchOne(const Shim& shim, CUfunction f) {
  CUdeviceptr p0 = shim.a + 4096;
  CUdeviceptr p1 = shim.b + 128;
  int n = 1024;
  float alpha = 0.5f;
  void* params[] = {&p0, &p1, &n, &alpha};
  return shim.api.launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr);
}

std::uint32_t TokenNamed(const chameleon::shim::testing::FakeClient& c, const std::string& name) {
  for (const auto& [token, n] : c.names) {
    if (n == name) return token;
  }
  return 0;
}

// The policy: the marker is the boundary; kEntries entries anchored on the kernel's occurrences
// (out at 100 + 300 i, in at 200 + 300 i, use at 300 + 300 i), of a size no tensor has.
chameleon::ipc::Policy BenchPolicy(std::uint32_t kernel, std::uint32_t marker) {
  chameleon::ipc::Policy p;
  p.summary.generation = 1;
  p.boundary = {marker};
  for (std::uint32_t i = 0; i < kEntries; ++i) {
    chameleon::ipc::SwapEntry e{};
    e.bytes = 12345;
    e.out_token = e.in_token = e.use_token = kernel;
    e.out_occurrence = 100 + 300 * i;
    e.in_occurrence = 200 + 300 * i;
    e.use_occurrence = 300 + 300 * i;
    p.entries.push_back(e);
  }
  return p;
}

// A copy of the shim at another path (dlopen would return the loaded one), connected, with the
// bench policy published and installed (the runner reports generation 1 applied).
bool LoadPolicyShim(Setup* s, const char* path, std::size_t index, std::size_t client) {
  const std::string copy = "/tmp/chameleon_shim_bench_policy_" + std::to_string(::getpid()) + "_" +
                           std::to_string(index) + ".so";
  std::error_code ec;
  std::filesystem::copy_file(path, copy, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec || !LoadShim(s, copy.c_str(), index, client)) return false;
  std::filesystem::remove(copy, ec);  // mapped already
  Shim& shim = s->shims[index];
  if (LaunchOne(shim, kKernel) != CUDA_SUCCESS || LaunchOne(shim, kMarker) != CUDA_SUCCESS) {
    return false;
  }
  chameleon::shim::testing::FakeClient* c = s->daemon.client(client);
  c->Drain();  // and the names
  const std::uint32_t kernel = TokenNamed(*c, "null_kernel_4args");
  const std::uint32_t marker = TokenNamed(*c, "null_marker");
  std::vector<std::uint8_t> blob;
  chameleon::ipc::EncodePolicy(BenchPolicy(kernel, marker), &blob);
  if (kernel == 0 || marker == 0 ||
      c->mailbox.Publish(blob) != chameleon::ipc::PublishResult::kOk) {
    std::fprintf(stderr, "cannot publish the bench policy (tokens %u, %u)\n", kernel, marker);
    return false;
  }
  // The client thread reads the mailbox on its timer; the runner installs at the next boundary.
  for (int tries = 0; tries < 500 && Stats(shim).policy_generation_applied != 1; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // setup only, never timed
    for (int i = 0; i < 10; ++i) LaunchOne(shim, kKernel);
    LaunchOne(shim, kMarker);
    c->Drain();
  }
  if (Stats(shim).policy_generation_applied != 1 || Stats(shim).executor_on != 1) {
    std::fprintf(stderr, "the bench policy was not installed\n");
    return false;
  }
  return true;
}

Setup& Get() {
  static Setup* setup = [] {
    auto* s = new Setup();
    const std::string socket = "/tmp/chameleon_shim_bench_" + std::to_string(::getpid()) + ".sock";
    if (!s->daemon.Start(socket)) return s;
    setenv("CHAMELEON_SOCKET", socket.c_str(), 1);
    setenv("CHAMELEON_REAL_LIBCUDA", CHAMELEON_NULL_DRIVER_PATH, 1);
    setenv("CHAMELEON_CONNECT_TIMEOUT_MS", "2000", 1);
    setenv("CHAMELEON_RING_BYTES", "16777216", 1);
    void* null_driver = dlopen(CHAMELEON_NULL_DRIVER_PATH, RTLD_NOW | RTLD_LOCAL);
    if (null_driver == nullptr) {
      std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
      return s;
    }
    s->direct = Resolve(null_driver);
    std::size_t clients = 0;
    if (!LoadShim(s, CHAMELEON_SHIM_PATH, 0, clients++)) return s;
    if (!LoadPolicyShim(s, CHAMELEON_SHIM_PATH, 2, clients++)) return s;
    if (ShimBPath() != nullptr && (!LoadShim(s, ShimBPath(), 1, clients++) ||
                                   !LoadPolicyShim(s, ShimBPath(), 3, clients++))) {
      return s;
    }
    s->ok = true;
    return s;
  }();
  return *setup;
}

std::uint64_t Drops(const Shim& shim) { return Stats(shim).records_dropped; }

// Consumes records without copying them (the daemon's own drain cost is not what we measure).
void Drain(Setup& s, const Shim& shim) {
  auto& consumer = s.daemon.client(shim.client)->consumer;
  while (consumer.Drain([](const chameleon::ipc::RecordView&) {}, 1 << 20, 0, ~0ull) > 0) {
  }
}

// `index`: the shim measured (-1: the null driver directly, the baseline).
void RunLaunch(benchmark::State& state, int index) {
  Setup& s = Get();
  if (!s.ok) {
    state.SkipWithError("setup failed");
    return;
  }
  const Shim& shim = s.shims[index < 0 ? 0 : index];
  const LaunchFn launch = index >= 0 ? shim.api.launch : s.direct.launch;
  // Two tracked pointers (interior addresses), an int and a float.
  CUdeviceptr p0 = shim.a + 4096;
  CUdeviceptr p1 = shim.b + 128;
  int n = 1024;
  float alpha = 0.5f;
  void* params[] = {&p0, &p1, &n, &alpha};
  const auto function = reinterpret_cast<CUfunction>(0x1000);
  Drain(s, shim);
  const std::uint64_t drops_before = Drops(shim);
  std::int64_t since_drain = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(launch(function, 1, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
    if (++since_drain == kDrainEvery) {
      state.PauseTiming();
      Drain(s, shim);
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  Drain(s, shim);
  state.counters["drops"] = static_cast<double>(Drops(shim) - drops_before);
}

// `index`: the policy shim measured (2: this tree's, 3: B's). Every kIterationOps-th launch is
// the marker (an iteration boundary: the runner's BeginIteration runs in the timed region).
void RunLaunchPolicy(benchmark::State& state, int index) {
  Setup& s = Get();
  if (!s.ok) {
    state.SkipWithError("setup failed");
    return;
  }
  const Shim& shim = s.shims[index];
  CUdeviceptr p0 = shim.a + 4096;
  CUdeviceptr p1 = shim.b + 128;
  int n = 1024;
  float alpha = 0.5f;
  void* params[] = {&p0, &p1, &n, &alpha};
  Drain(s, shim);
  // Start at an iteration boundary, so that every timed iteration is a whole one.
  LaunchOne(shim, kMarker);
  const ChameleonShimStats before = Stats(shim);
  std::int64_t since_drain = 0, in_iteration = 0;
  for (auto _ : state) {
    const CUfunction f = ++in_iteration == kIterationOps ? kMarker : kKernel;
    if (in_iteration == kIterationOps) in_iteration = 0;
    benchmark::DoNotOptimize(shim.api.launch(f, 1, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
    if (++since_drain == kDrainEvery) {
      state.PauseTiming();
      Drain(s, shim);
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  Drain(s, shim);
  const ChameleonShimStats after = Stats(shim);
  const double iterations =
      static_cast<double>(after.executor_iterations - before.executor_iterations);
  state.counters["drops"] = static_cast<double>(after.records_dropped - before.records_dropped);
  state.counters["generation"] = static_cast<double>(after.policy_generation_applied);
  state.counters["ignored_per_iteration"] =
      iterations > 0
          ? static_cast<double>(after.policy_ignored - before.policy_ignored) / iterations
          : 0.0;
}

void RunAllocAsync(benchmark::State& state, int index) {
  Setup& s = Get();
  if (!s.ok) {
    state.SkipWithError("setup failed");
    return;
  }
  const Shim& shim = s.shims[index < 0 ? 0 : index];
  const Api& api = index >= 0 ? shim.api : s.direct;
  Drain(s, shim);
  const std::uint64_t drops_before = Drops(shim);
  std::int64_t since_drain = 0;
  for (auto _ : state) {
    CUdeviceptr p = 0;
    benchmark::DoNotOptimize(api.alloc_async(&p, 1 << 20, nullptr));
    benchmark::DoNotOptimize(api.free_async(p, nullptr));
    if (++since_drain == kDrainEvery) {
      state.PauseTiming();
      Drain(s, shim);
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  Drain(s, shim);
  state.counters["drops"] = static_cast<double>(Drops(shim) - drops_before);
}

void BM_LaunchDirect(benchmark::State& state) { RunLaunch(state, -1); }
void BM_LaunchShim(benchmark::State& state) { RunLaunch(state, 0); }
/// A policy in force: one trigger every ~100 launches, a boundary every kIterationOps.
void BM_LaunchShimPolicy(benchmark::State& state) { RunLaunchPolicy(state, 2); }
/// One iteration = cuMemAllocAsync + cuMemFreeAsync (the table must not grow without bound).
void BM_AllocAsyncDirect(benchmark::State& state) { RunAllocAsync(state, -1); }
void BM_AllocAsyncShim(benchmark::State& state) { RunAllocAsync(state, 0); }

BENCHMARK(BM_LaunchDirect);
BENCHMARK(BM_LaunchShim);
BENCHMARK(BM_LaunchShimPolicy);
BENCHMARK(BM_AllocAsyncDirect);
BENCHMARK(BM_AllocAsyncShim);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (ShimBPath() != nullptr) {
    // Run with --benchmark_enable_random_interleaving=true so that A and B share the noise.
    benchmark::RegisterBenchmark("BM_LaunchShimB", [](benchmark::State& st) { RunLaunch(st, 1); });
    benchmark::RegisterBenchmark("BM_LaunchShimPolicyB",
                                 [](benchmark::State& st) { RunLaunchPolicy(st, 3); });
    benchmark::RegisterBenchmark("BM_AllocAsyncShimB",
                                 [](benchmark::State& st) { RunAllocAsync(st, 1); });
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
