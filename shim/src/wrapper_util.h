// Helpers shared by the wrapper files (the top layer, docs/shim.md "Layers"): the export macros,
// the entry of every wrapper (init.h) and the op paths they call (op_path.h).
#pragma once

#include <cuda.h>

#include "init.h"
#include "op_path.h"

/// Defines an exported wrapper whose symbol is exactly NAME (an asm label, so cuda.h's
/// `#define cuMemAlloc cuMemAlloc_v2` style macros cannot interfere) and whose C++ name is W_NAME.
#define CHAMELEON_WRAPPER(NAME, PARAMS)                                                      \
  extern "C" __attribute__((visibility("default"))) CUresult W_##NAME PARAMS __asm__(#NAME); \
  extern "C" CUresult W_##NAME PARAMS

/// Forward to the real entry point or report a missing driver.
#define CHAMELEON_REAL(RT, NAME, TYPE)     \
  auto real = Real<TYPE>(RT, kSym_##NAME); \
  if (real == nullptr) return CUDA_ERROR_NOT_INITIALIZED
