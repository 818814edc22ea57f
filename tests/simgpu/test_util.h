// Helpers shared by the simgpu tests: a module image with a few kernels and a fixture that
// initialises the driver (each gtest TEST runs in its own process, so env vars set in a test
// before Init() configure that process's simulated node).
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "chameleon/simgpu/control.h"
#include "chameleon/simgpu/module_image.h"

namespace simgpu_test {

using chameleon::simgpu::KernelCost;
using chameleon::simgpu::KernelEntry;
using chameleon::simgpu::LaunchDims;
using chameleon::simgpu::ModuleImage;

/// A latch a kernel can block on: the test opens it when it has observed "not ready".
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> entered{0};
  void Open() {
    std::lock_guard lock(mu);
    open = true;
    cv.notify_all();
  }
  void Wait() {
    entered.fetch_add(1);
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return open; });
  }
};

// add(float* a, const float* b, int n): a[i] += b[i]; cost: n flops, 12n bytes.
inline void AddKernel(void* const* p, const LaunchDims&) {
  float* a = *static_cast<float* const*>(p[0]);
  const float* b = *static_cast<const float* const*>(p[1]);
  const int n = *static_cast<const int*>(p[2]);
  for (int i = 0; i < n; ++i) a[i] += b[i];
}
inline KernelCost AddCost(void* const* p, const LaunchDims&) {
  const int n = *static_cast<const int*>(p[2]);
  return {static_cast<double>(n), 12.0 * n};
}

// append(int* log, int value): log[log[0] + 1] = value; ++log[0]. Records execution order.
inline void AppendKernel(void* const* p, const LaunchDims&) {
  int* log = *static_cast<int* const*>(p[0]);
  log[log[0] + 1] = *static_cast<const int*>(p[1]);
  ++log[0];
}

// block(Gate* gate): waits until the test opens the gate. The gate lives in pinned host memory
// (cuMemHostAlloc), which the host-pointer rule allows kernels to use.
inline void BlockKernel(void* const* p, const LaunchDims&) {
  (*static_cast<Gate* const*>(p[0]))->Wait();
}

// cost(double flops, double bytes): does nothing, costs exactly what it is told.
inline KernelCost GivenCost(void* const* p, const LaunchDims&) {
  return {*static_cast<const double*>(p[0]), *static_cast<const double*>(p[1])};
}
inline void NoopKernel(void* const*, const LaunchDims&) {}

// touch(char* p): writes one byte (faults if p is unmapped).
inline void TouchKernel(void* const* p, const LaunchDims&) {
  char* ptr = *static_cast<char* const*>(p[0]);
  *static_cast<volatile char*>(ptr) = 1;
}

// throw(): a kernel whose host function throws (a bug in a workload's kernel).
inline void ThrowKernel(void* const*, const LaunchDims&) { throw std::runtime_error("kernel bug"); }

inline const KernelEntry kKernels[] = {
    {"add", AddKernel, AddCost, 3, {{0, 8}, {8, 8}, {16, 4}}},
    {"append", AppendKernel, nullptr, 2, {{0, 8}, {8, 4}}},
    {"block", BlockKernel, nullptr, 1, {{0, 8}}},
    {"cost", NoopKernel, GivenCost, 2, {{0, 8}, {8, 8}}},
    {"touch", TouchKernel, nullptr, 1, {{0, 8}}},
    {"throw", ThrowKernel, nullptr, 0, {}},
};
inline const ModuleImage kImage{chameleon::simgpu::kModuleImageMagic,
                                chameleon::simgpu::kModuleImageVersion,
                                sizeof(kKernels) / sizeof(kKernels[0]), 0, kKernels};

/// The files UniqueTempPath named, removed when the test process exits (simgpu reads them at
/// cuInit, during the test; left behind, every run added a few hundred to /tmp).
struct TempFiles {
  std::vector<std::string> paths;
  ~TempFiles() {
    for (const std::string& path : paths) std::remove(path.c_str());
  }
};
inline TempFiles& RegisteredTempFiles() {
  static TempFiles files;
  return files;
}

/// A temp file path private to this process (tests run in parallel processes), removed at exit.
inline std::string UniqueTempPath(const std::string& stem) {
  std::string path = ::testing::TempDir() + "/" + stem + "_" + std::to_string(getpid()) + ".yaml";
  RegisteredTempFiles().paths.push_back(path);
  return path;
}

#define ASSERT_CU(expr) ASSERT_EQ((expr), CUDA_SUCCESS) << #expr
#define EXPECT_CU(expr) EXPECT_EQ((expr), CUDA_SUCCESS) << #expr

/// Initialises device 0's primary context and loads kImage.
class SimgpuTest : public ::testing::Test {
 protected:
  void Init() {
    ASSERT_CU(cuInit(0));
    ASSERT_CU(cuDeviceGet(&dev_, 0));
    ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx_, dev_));
    ASSERT_CU(cuCtxSetCurrent(ctx_));
    ASSERT_CU(cuModuleLoadData(&module_, &kImage));
    for (const char* name : {"add", "append", "block", "cost", "touch", "throw"}) {
      CUfunction f = nullptr;
      ASSERT_CU(cuModuleGetFunction(&f, module_, name));
      fns_[name] = f;
    }
  }
  CUfunction Fn(const std::string& name) { return fns_.at(name); }

  /// A Gate placed in pinned host memory (never freed: a test process is short-lived).
  static Gate* NewPinnedGate() {
    void* p = nullptr;
    if (cuMemHostAlloc(&p, sizeof(Gate), 0) != CUDA_SUCCESS) return nullptr;
    return new (p) Gate;
  }
  CUresult LaunchBlock(Gate* gate, CUstream s) {
    void* args[] = {&gate};
    return cuLaunchKernel(Fn("block"), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  CUresult LaunchAppend(CUdeviceptr log, int value, CUstream s) {
    void* args[] = {&log, &value};
    return cuLaunchKernel(Fn("append"), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  CUresult LaunchCost(double flops, double bytes, CUstream s) {
    void* args[] = {&flops, &bytes};
    return cuLaunchKernel(Fn("cost"), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  CUresult LaunchTouch(CUdeviceptr p, CUstream s) {
    void* args[] = {&p};
    return cuLaunchKernel(Fn("touch"), 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }

  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  std::map<std::string, CUfunction> fns_;
};

}  // namespace simgpu_test
