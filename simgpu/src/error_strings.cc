// cuGetErrorName / cuGetErrorString over the table extracted from cuda.h.
#include "api.h"

namespace {

struct ErrorInfo {
  CUresult code;
  const char* name;
  const char* text;
};

constexpr ErrorInfo kErrors[] = {
#define SIMGPU_ERROR(code, text) {code, #code, text},
#include "error_names.inc"
#undef SIMGPU_ERROR
};

const ErrorInfo* Find(CUresult r) {
  for (const auto& e : kErrors)
    if (e.code == r) return &e;
  return nullptr;
}

}  // namespace

// Neither needs cuInit, as with the real driver.
SIMGPU_API CUresult cuGetErrorName(CUresult error, const char** str) try {
  SIMGPU_ENTRY();
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  const ErrorInfo* e = Find(error);
  *str = e ? e->name : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuGetErrorString(CUresult error, const char** str) try {
  SIMGPU_ENTRY();
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  const ErrorInfo* e = Find(error);
  *str = e ? e->text : nullptr;
  return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
SIMGPU_CATCH
