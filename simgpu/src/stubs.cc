// Every driver entry point named in cudaTypedefs.h exists in simgpu's libcuda.so.1: the ones simgpu
// implements are strong definitions elsewhere; the rest are these weak stubs, which count the call
// and return CUDA_ERROR_NOT_SUPPORTED (801) whatever their real signature (caller-cleaned C ABI:
// ignoring the arguments is safe). Deliberately does not include cuda.h, whose prototypes differ.
#include "call_counter.h"

namespace {
constexpr int kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED
}

#define SIMGPU_ABI(sym)                                               \
  extern "C" __attribute__((weak, visibility("default"))) int sym() { \
    SIMGPU_ENTRY();                                                   \
    return kNotSupported;                                             \
  }
#include "proc_table_gen.inc"
#undef SIMGPU_ABI
