// Shared set-up of the shim's workload programs on simgpu: device 0's primary context and a
// module with three kernels. Programs are linked directly against simgpu's libcuda.so.1 and run
// with LD_PRELOAD=libchameleon.so by the tests.
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#include "chameleon/simgpu/module_image.h"

namespace shim_test {

using chameleon::simgpu::KernelEntry;
using chameleon::simgpu::LaunchDims;
using chameleon::simgpu::ModuleImage;

// axpy(float* y, const float* x, int n, float a): y += a * x.
inline void AxpyKernel(void* const* p, const LaunchDims&) {
  float* y = *static_cast<float* const*>(p[0]);
  const float* x = *static_cast<const float* const*>(p[1]);
  const int n = *static_cast<const int*>(p[2]);
  const float a = *static_cast<const float*>(p[3]);
  for (int i = 0; i < n; ++i) y[i] += a * x[i];
}
// scale(float* y, int n, float a): y *= a.
inline void ScaleKernel(void* const* p, const LaunchDims&) {
  float* y = *static_cast<float* const*>(p[0]);
  const int n = *static_cast<const int*>(p[1]);
  const float a = *static_cast<const float*>(p[2]);
  for (int i = 0; i < n; ++i) y[i] *= a;
}
// sum3(float* out, const float* a, const float* b, const float* c, int n): out = a + b + c.
inline void Sum3Kernel(void* const* p, const LaunchDims&) {
  float* out = *static_cast<float* const*>(p[0]);
  const float* a = *static_cast<const float* const*>(p[1]);
  const float* b = *static_cast<const float* const*>(p[2]);
  const float* c = *static_cast<const float* const*>(p[3]);
  const int n = *static_cast<const int*>(p[4]);
  for (int i = 0; i < n; ++i) out[i] = a[i] + b[i] + c[i];
}

inline const KernelEntry kKernels[] = {
    {"axpy", AxpyKernel, nullptr, 4, {{0, 8}, {8, 8}, {16, 4}, {20, 4}}},
    {"scale", ScaleKernel, nullptr, 3, {{0, 8}, {8, 4}, {12, 4}}},
    {"sum3", Sum3Kernel, nullptr, 5, {{0, 8}, {8, 8}, {16, 8}, {24, 8}, {32, 4}}},
};
inline const ModuleImage kImage{chameleon::simgpu::kModuleImageMagic,
                                chameleon::simgpu::kModuleImageVersion, 3, 0, kKernels};

#define CHECK_CU(expr)                                                     \
  do {                                                                     \
    const CUresult check_cu_result = (expr);                               \
    if (check_cu_result != CUDA_SUCCESS) {                                 \
      std::fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #expr, \
                   static_cast<int>(check_cu_result));                     \
      std::exit(3);                                                        \
    }                                                                      \
  } while (0)

struct Env {
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule module = nullptr;
  CUfunction axpy = nullptr;
  CUfunction scale = nullptr;
  CUfunction sum3 = nullptr;

  void Init() {
    CHECK_CU(cuInit(0));
    CHECK_CU(cuDeviceGet(&dev, 0));
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CHECK_CU(cuModuleLoadData(&module, &kImage));
    CHECK_CU(cuModuleGetFunction(&axpy, module, "axpy"));
    CHECK_CU(cuModuleGetFunction(&scale, module, "scale"));
    CHECK_CU(cuModuleGetFunction(&sum3, module, "sum3"));
  }
};

}  // namespace shim_test
