// shim_bench: the cost the shim adds to a kernel launch and to an async allocation.
//
// Both sides call the same null driver (bench/shim/null_driver.cc); "Shim" goes through
// libchameleon.so, loaded here with dlopen (no LD_PRELOAD), with telemetry on: an in-process
// fake daemon accepts the shim's HELLO, so every launch becomes a ring record with its tensors.
// The ring is drained with timing paused every kDrainEvery iterations; the `drops` counter must
// read 0. The kernel has four parameters, two of them tracked device pointers.
//
//   build-*/bench/shim_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
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

struct Setup {
  chameleon::shim::testing::FakeDaemon daemon;
  Api direct;
  Api shim;
  ChameleonShimGetStatsFn stats = nullptr;
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
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
    void* shim = dlopen(CHAMELEON_SHIM_PATH, RTLD_NOW | RTLD_LOCAL);
    if (null_driver == nullptr || shim == nullptr) {
      std::fprintf(stderr, "dlopen failed: %s\n", dlerror());
      return s;
    }
    s->direct = Resolve(null_driver);
    s->shim = Resolve(shim);
    s->stats = Sym<ChameleonShimGetStatsFn>(shim, "chameleon_shim_get_stats");
    // The first tracked call initialises the shim and connects (synchronously, bounded).
    if (s->shim.alloc(&s->a, 64 << 20) != CUDA_SUCCESS ||
        s->shim.alloc(&s->b, 64 << 20) != CUDA_SUCCESS || !s->daemon.WaitForClients(1, 5000)) {
      std::fprintf(stderr, "shim did not connect to the bench daemon\n");
      return s;
    }
    s->ok = true;
    return s;
  }();
  return *setup;
}

std::uint64_t Drops(Setup& s) {
  ChameleonShimStats st{};
  s.stats(&st, sizeof(st));
  return st.records_dropped;
}

// Consumes records without copying them (the daemon's own drain cost is not what we measure).
void Drain(Setup& s) {
  auto& consumer = s.daemon.client(0)->consumer;
  while (consumer.Drain([](const chameleon::ipc::RecordView&) {}, 1 << 20, 0, ~0ull) > 0) {
  }
}

void RunLaunch(benchmark::State& state, bool through_shim) {
  Setup& s = Get();
  if (!s.ok) {
    state.SkipWithError("setup failed");
    return;
  }
  const LaunchFn launch = through_shim ? s.shim.launch : s.direct.launch;
  // Two tracked pointers (interior addresses), an int and a float.
  CUdeviceptr p0 = s.a + 4096;
  CUdeviceptr p1 = s.b + 128;
  int n = 1024;
  float alpha = 0.5f;
  void* params[] = {&p0, &p1, &n, &alpha};
  const auto function = reinterpret_cast<CUfunction>(0x1000);
  Drain(s);
  const std::uint64_t drops_before = Drops(s);
  std::int64_t since_drain = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(launch(function, 1, 1, 1, 128, 1, 1, 0, nullptr, params, nullptr));
    if (++since_drain == kDrainEvery) {
      state.PauseTiming();
      Drain(s);
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  Drain(s);
  state.counters["drops"] = static_cast<double>(Drops(s) - drops_before);
}

void RunAllocAsync(benchmark::State& state, bool through_shim) {
  Setup& s = Get();
  if (!s.ok) {
    state.SkipWithError("setup failed");
    return;
  }
  const Api& api = through_shim ? s.shim : s.direct;
  Drain(s);
  const std::uint64_t drops_before = Drops(s);
  std::int64_t since_drain = 0;
  for (auto _ : state) {
    CUdeviceptr p = 0;
    benchmark::DoNotOptimize(api.alloc_async(&p, 1 << 20, nullptr));
    benchmark::DoNotOptimize(api.free_async(p, nullptr));
    if (++since_drain == kDrainEvery) {
      state.PauseTiming();
      Drain(s);
      since_drain = 0;
      state.ResumeTiming();
    }
  }
  Drain(s);
  state.counters["drops"] = static_cast<double>(Drops(s) - drops_before);
}

void BM_LaunchDirect(benchmark::State& state) { RunLaunch(state, false); }
void BM_LaunchShim(benchmark::State& state) { RunLaunch(state, true); }
/// One iteration = cuMemAllocAsync + cuMemFreeAsync (the table must not grow without bound).
void BM_AllocAsyncDirect(benchmark::State& state) { RunAllocAsync(state, false); }
void BM_AllocAsyncShim(benchmark::State& state) { RunAllocAsync(state, true); }

BENCHMARK(BM_LaunchDirect);
BENCHMARK(BM_LaunchShim);
BENCHMARK(BM_AllocAsyncDirect);
BENCHMARK(BM_AllocAsyncShim);

}  // namespace

BENCHMARK_MAIN();
