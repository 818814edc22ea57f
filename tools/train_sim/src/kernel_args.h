// Reading kernel arguments: params[i] points at the value of parameter i, exactly as
// cuLaunchKernel's kernelParams. memcpy because the driver may hand us an unaligned packed buffer.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <cstring>

namespace chameleon::train_sim::kernels {

template <class T>
inline T Arg(void* const* params, int index) {
  T value;
  std::memcpy(&value, params[index], sizeof(T));
  return value;
}

/// A device pointer parameter as a float array (simgpu device pointers are host addresses).
inline float* F32(void* const* params, int index) {
  return reinterpret_cast<float*>(static_cast<std::uintptr_t>(Arg<CUdeviceptr>(params, index)));
}

inline const std::int32_t* I32(void* const* params, int index) {
  return reinterpret_cast<const std::int32_t*>(
      static_cast<std::uintptr_t>(Arg<CUdeviceptr>(params, index)));
}

/// tanh(u) = 1 - 2 / (e^{2u} + 1), shared by GELU forward and backward (kernels_forward.cc).
float FastTanh(float u);

inline int Int(void* const* params, int index) { return Arg<std::int32_t>(params, index); }
inline float Float(void* const* params, int index) { return Arg<float>(params, index); }

}  // namespace chameleon::train_sim::kernels
