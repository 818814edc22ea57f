// shim_bench: the cost the shim adds to a kernel launch and to an async allocation.
//
// Both sides call the same null driver (bench/shim/null_driver.cc); "Shim" goes through
// libchameleon.so, loaded here with dlopen (no LD_PRELOAD), with telemetry on: an in-process
// fake daemon accepts the shim's HELLO, so every launch becomes a ring record with its tensors.
// The ring is drained with timing paused every kDrainEvery iterations; the `drops` counter must
// read 0. The kernel has four parameters, two of them tracked device pointers.
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

#include <cstdio>
#include <cstdlib>
#include <string>

#include "chameleon/shim/shim_api.h"
#include "fake_daemon.h"

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);
using AllocAsyncFn = CUresult (*)(CUdeviceptr*, size_t, CUstream);
using FreeAsyncFn = CUresult (*)(CUdeviceptr, CUstream);
using AllocFn = CUresult (*)(CUdeviceptr*, size_t);

constexpr std::int64_t kDrainEvery = 1 << 16;

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
  Shim shims[2];  ///< [0] this tree's shim, [1] CHAMELEON_BENCH_SHIM_B when set
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
bool LoadShim(Setup* s, const char* path, std::size_t index) {
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
    return false;
  }
  Shim& shim = s->shims[index];
  shim.api = Resolve(handle);
  shim.stats = Sym<ChameleonShimGetStatsFn>(handle, "chameleon_shim_get_stats");
  shim.client = index;
  if (shim.api.alloc(&shim.a, 64 << 20) != CUDA_SUCCESS ||
      shim.api.alloc(&shim.b, 64 << 20) != CUDA_SUCCESS ||
      !s->daemon.WaitForClients(index + 1, 5000)) {
    std::fprintf(stderr, "shim %s did not connect to the bench daemon\n", path);
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
    if (!LoadShim(s, CHAMELEON_SHIM_PATH, 0)) return s;
    if (ShimBPath() != nullptr && !LoadShim(s, ShimBPath(), 1)) return s;
    s->ok = true;
    return s;
  }();
  return *setup;
}

std::uint64_t Drops(const Shim& shim) {
  ChameleonShimStats st{};
  shim.stats(&st, sizeof(st));
  return st.records_dropped;
}

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
/// One iteration = cuMemAllocAsync + cuMemFreeAsync (the table must not grow without bound).
void BM_AllocAsyncDirect(benchmark::State& state) { RunAllocAsync(state, -1); }
void BM_AllocAsyncShim(benchmark::State& state) { RunAllocAsync(state, 0); }

BENCHMARK(BM_LaunchDirect);
BENCHMARK(BM_LaunchShim);
BENCHMARK(BM_AllocAsyncDirect);
BENCHMARK(BM_AllocAsyncShim);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (ShimBPath() != nullptr) {
    // Run with --benchmark_enable_random_interleaving=true so that A and B share the noise.
    benchmark::RegisterBenchmark("BM_LaunchShimB", [](benchmark::State& st) { RunLaunch(st, 1); });
    benchmark::RegisterBenchmark("BM_AllocAsyncShimB",
                                 [](benchmark::State& st) { RunAllocAsync(st, 1); });
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
