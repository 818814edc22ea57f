// Test fixture for the swap executor: dlopens simgpu's libcuda.so.1 (CHAMELEON_SIMGPU_LIB), fills
// the executor's DriverApi from it exactly as the shim will from its real driver, and provides a
// few simgpu kernels (host functions) that fill, check and touch device memory.
#pragma once

#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>

#include "chameleon/simgpu/control.h"
#include "chameleon/simgpu/module_image.h"
#include "swap/counters.h"
#include "swap/driver_api.h"
#include "swap/swap_engine.h"

namespace swap_test {

using chameleon::simgpu::KernelEntry;
using chameleon::simgpu::LaunchDims;
using chameleon::simgpu::ModuleImage;
namespace sw = chameleon::shim::swap;

inline constexpr std::size_t kMiB = 1u << 20;

inline std::uint32_t Pattern(std::uint32_t seed, std::uint64_t i) {
  return seed * 2654435761u + static_cast<std::uint32_t>(i * 40503u);
}

/// Lives in pinned host memory so kernels may use it (simgpu's host-pointer rule).
struct Signal {
  std::mutex mu;
  std::condition_variable cv;
  bool reader_done = false;
};

// fill(u32* p, u64 words, u32 seed)
inline void FillKernel(void* const* p, const LaunchDims&) {
  auto* d = *static_cast<std::uint32_t* const*>(p[0]);
  const auto n = *static_cast<const std::uint64_t*>(p[1]);
  const auto seed = *static_cast<const std::uint32_t*>(p[2]);
  for (std::uint64_t i = 0; i < n; ++i) d[i] = Pattern(seed, i);
}
// check(const u32* p, u64 words, u32 seed, u64* mismatches, Signal* signal_or_null)
inline void CheckKernel(void* const* p, const LaunchDims&) {
  const auto* d = *static_cast<const std::uint32_t* const*>(p[0]);
  const auto n = *static_cast<const std::uint64_t*>(p[1]);
  const auto seed = *static_cast<const std::uint32_t*>(p[2]);
  auto* out = *static_cast<std::uint64_t* const*>(p[3]);
  auto* signal = *static_cast<Signal* const*>(p[4]);
  std::uint64_t bad = 0;
  for (std::uint64_t i = 0; i < n; ++i) bad += d[i] != Pattern(seed, i);
  *out = bad;
  if (signal) {
    std::lock_guard lock(signal->mu);
    signal->reader_done = true;
    signal->cv.notify_all();
  }
}
// hold(Signal*): blocks until the reader has run, or 1 s (the outcome of the tests using it
// never depends on which: it only decides whether the reader runs before a queued copy).
inline void HoldKernel(void* const* p, const LaunchDims&) {
  auto* signal = *static_cast<Signal* const*>(p[0]);
  std::unique_lock lock(signal->mu);
  signal->cv.wait_for(lock, std::chrono::milliseconds(1000), [&] { return signal->reader_done; });
}
// gate(Signal*): blocks until the test opens it (reader_done), or 20 s: for tests that open it
// themselves after observing that other work completed while it was closed.
inline void GateKernel(void* const* p, const LaunchDims&) {
  auto* signal = *static_cast<Signal* const*>(p[0]);
  std::unique_lock lock(signal->mu);
  signal->cv.wait_for(lock, std::chrono::seconds(20), [&] { return signal->reader_done; });
}
// touch(volatile char* p): reads one byte (faults when unmapped).
inline void TouchKernel(void* const* p, const LaunchDims&) {
  const volatile char* d = *static_cast<const volatile char* const*>(p[0]);
  (void)*d;
}

inline const KernelEntry kKernels[] = {
    {"fill", FillKernel, nullptr, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"check", CheckKernel, nullptr, 5, {{0, 8}, {8, 8}, {16, 4}, {24, 8}, {32, 8}}},
    {"hold", HoldKernel, nullptr, 1, {{0, 8}}},
    {"touch", TouchKernel, nullptr, 1, {{0, 8}}},
    {"gate", GateKernel, nullptr, 1, {{0, 8}}},
};
inline const ModuleImage kImage{chameleon::simgpu::kModuleImageMagic,
                                chameleon::simgpu::kModuleImageVersion,
                                sizeof(kKernels) / sizeof(kKernels[0]), 0, kKernels};

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

class SwapFixture : public ::testing::Test {
 protected:
  template <typename Fn>
  void Sym(const char* name, Fn* out) {
    *out = reinterpret_cast<Fn>(dlsym(lib_, name));
    ASSERT_NE(*out, nullptr) << name;
  }

  void SetUp() override {
    lib_ = dlopen(CHAMELEON_SIMGPU_LIB, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    ASSERT_EQ(sw::ResolveDriverApi(lib_, &dlsym, &api_), nullptr);
    Sym("cuInit", &init_);
    Sym("cuDeviceGet", &device_get_);
    Sym("cuDevicePrimaryCtxRetain", &ctx_retain_);
    Sym("cuCtxSetCurrent", &ctx_set_current_);
    Sym("cuModuleLoadData", &module_load_);
    Sym("cuModuleGetFunction", &module_get_function_);
    Sym("cuLaunchKernel", &launch_);
    Sym("cuStreamSynchronize", &stream_sync_);
    Sym("cuCtxSynchronize", &ctx_sync_);
    Sym("cuMemcpyHtoD_v2", &htod_);
    Sym("cuMemcpyDtoH_v2", &dtoh_);
    Sym("simgpuGetPhysicalUsage", &physical_usage_);
    Sym("simgpuGetCallCount", &call_count_);
    ASSERT_CU(init_(0));
    CUdevice dev = 0;
    ASSERT_CU(device_get_(&dev, 0));
    ASSERT_CU(ctx_retain_(&ctx_, dev));
    ASSERT_CU(ctx_set_current_(ctx_));
    ASSERT_CU(module_load_(&module_, &kImage));
    for (auto [name, fn] : {std::pair{"fill", &fill_},
                            {"check", &check_},
                            {"hold", &hold_},
                            {"touch", &touch_},
                            {"gate", &gate_}})
      ASSERT_CU(module_get_function_(fn, module_, name));
    ASSERT_CU(api_.stream_create(&compute_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(api_.stream_create(&other_, CU_STREAM_NON_BLOCKING));
    void* p = nullptr;
    ASSERT_CU(api_.mem_host_alloc(&p, 4096, 0));
    results_ = static_cast<std::uint64_t*>(p);
    ASSERT_CU(api_.mem_host_alloc(&p, sizeof(Signal), 0));
    signal_ = new (p) Signal;
  }

  /// Creates the engine under test (call from the test body after setting options).
  void StartEngine(const sw::SwapEngineOptions& options = {}) {
    engine_ = std::make_unique<sw::SwapEngine>(api_, options, &counters_);
    ASSERT_CU(engine_->Init());
  }

  CUresult Fill(CUdeviceptr p, std::size_t bytes, std::uint32_t seed, CUstream s) {
    std::uint64_t words = bytes / 4;
    void* args[] = {&p, &words, &seed};
    return launch_(fill_, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  /// Queues a check of `bytes` at p against `seed`; mismatches land in results_[slot].
  CUresult Check(CUdeviceptr p, std::size_t bytes, std::uint32_t seed, CUstream s, int slot,
                 Signal* signal = nullptr) {
    std::uint64_t words = bytes / 4;
    std::uint64_t* out = &results_[slot];
    *out = ~0ull;
    void* args[] = {&p, &words, &seed, &out, &signal};
    return launch_(check_, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  CUresult Hold(CUstream s) {
    Signal* signal = signal_;
    void* args[] = {&signal};
    return launch_(hold_, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  /// Makes `target` wait behind a kernel that blocks until `signal` is set, or 20 s
  /// (`open_by_test`: the test opens it) or 1 s (the signal may never come when the engine orders
  /// correctly).
  CUresult Gate(CUstream target, Signal* signal, bool open_by_test) {
    CUstream gate = nullptr;
    CUevent held = nullptr;
    CUresult r = api_.stream_create(&gate, CU_STREAM_NON_BLOCKING);
    if (r == CUDA_SUCCESS) r = api_.event_create(&held, CU_EVENT_DISABLE_TIMING);
    void* args[] = {&signal};
    CUfunction f = open_by_test ? gate_ : hold_;
    if (r == CUDA_SUCCESS) r = launch_(f, 1, 1, 1, 1, 1, 1, 0, gate, args, nullptr);
    if (r == CUDA_SUCCESS) r = api_.event_record(held, gate);
    if (r == CUDA_SUCCESS) r = api_.stream_wait_event(target, held, 0);
    return r;
  }
  /// Queues on `s` a kernel that sets `signal` (a check of nothing).
  CUresult Notify(CUstream s, Signal* signal, int slot) {
    return Check(reinterpret_cast<CUdeviceptr>(&results_[slot]), 0, 0, s, slot, signal);
  }
  static void Open(Signal* signal) {
    std::lock_guard lock(signal->mu);
    signal->reader_done = true;
    signal->cv.notify_all();
  }
  /// A Signal in pinned host memory (kernels may use it); freed with the context.
  Signal* NewSignal() {
    void* p = nullptr;
    if (api_.mem_host_alloc(&p, sizeof(Signal), 0) != CUDA_SUCCESS) return nullptr;
    return new (p) Signal;
  }
  CUresult Touch(CUdeviceptr p, CUstream s) {
    void* args[] = {&p};
    return launch_(touch_, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  /// The race probe. A's pooled chunks are first overwritten by another allocation, then A's
  /// swap-in copy is held back on the side stream (behind a kernel that waits for the reader, or
  /// 1 s) while a consumer on another stream reads A after WaitResident. Returns the
  /// consumer's mismatch count: 0 when it waited for the swap-in; the overwritten data otherwise.
  std::uint64_t GatedConsumerMismatches() {
    constexpr std::size_t kBytes = 4 * kMiB;
    CUdeviceptr a = 0, b = 0;
    sw::AllocId ida = 0, idb = 0;
    EXPECT_CU(engine_->Allocate(kBytes, compute_, &a, &ida));
    EXPECT_CU(Fill(a, kBytes, 7, compute_));
    EXPECT_CU(engine_->SwapOut(ida, compute_));
    EXPECT_CU(ctx_sync_());
    engine_->FlushUnmaps();  // A's VA unmapped: its chunks are free for B
    EXPECT_CU(engine_->Allocate(kBytes, compute_, &b, &idb));
    EXPECT_CU(Fill(b, kBytes, 99, compute_));
    EXPECT_CU(engine_->Free(idb, compute_));
    EXPECT_CU(ctx_sync_());
    engine_->FlushUnmaps();
    // Hold the side stream.
    CUstream gate = nullptr;
    CUevent held = nullptr;
    EXPECT_CU(api_.stream_create(&gate, CU_STREAM_NON_BLOCKING));
    EXPECT_CU(api_.event_create(&held, CU_EVENT_DISABLE_TIMING));
    EXPECT_CU(Hold(gate));
    EXPECT_CU(api_.event_record(held, gate));
    EXPECT_CU(api_.stream_wait_event(engine_->side_stream(), held, 0));
    EXPECT_CU(engine_->SwapIn(ida));
    EXPECT_CU(engine_->WaitResident(ida, other_));
    EXPECT_CU(Check(a, kBytes, 7, other_, 0, signal_));
    EXPECT_CU(ctx_sync_());
    return results_[0];
  }

  std::uint64_t PhysicalLive() {
    std::uint64_t live = 0, peak = 0;
    physical_usage_(0, &live, &peak);
    return live;
  }
  std::uint64_t PhysicalPeak() {
    std::uint64_t live = 0, peak = 0;
    physical_usage_(0, &live, &peak);
    return peak;
  }
  std::uint64_t Calls(const char* name) { return call_count_(name); }

  void* lib_ = nullptr;
  sw::DriverApi api_;
  sw::SwapCounters counters_;
  std::unique_ptr<sw::SwapEngine> engine_;
  CUresult (*init_)(unsigned) = nullptr;
  CUresult (*device_get_)(CUdevice*, int) = nullptr;
  CUresult (*ctx_retain_)(CUcontext*, CUdevice) = nullptr;
  CUresult (*ctx_set_current_)(CUcontext) = nullptr;
  CUresult (*module_load_)(CUmodule*, const void*) = nullptr;
  CUresult (*module_get_function_)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*launch_)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, CUstream, void**, void**) = nullptr;
  CUresult (*stream_sync_)(CUstream) = nullptr;
  CUresult (*ctx_sync_)() = nullptr;
  CUresult (*htod_)(CUdeviceptr, const void*, size_t) = nullptr;
  CUresult (*dtoh_)(void*, CUdeviceptr, size_t) = nullptr;
  chameleon::simgpu::GetPhysicalUsageFn physical_usage_ = nullptr;
  chameleon::simgpu::GetCallCountFn call_count_ = nullptr;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction fill_ = nullptr, check_ = nullptr, hold_ = nullptr, touch_ = nullptr, gate_ = nullptr;
  CUstream compute_ = nullptr, other_ = nullptr;
  std::uint64_t* results_ = nullptr;  // pinned: kernels write, the test reads after a sync
  Signal* signal_ = nullptr;
};

}  // namespace swap_test
