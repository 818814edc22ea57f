// cuInit's work: builds the driver state (driver.h) with each primary context's legacy stream,
// and registers the fork handlers and the exit report. Above the streams and the driver state,
// which it wires together; called by the cuInit entry point only.
#pragma once

#include <cuda.h>

namespace chameleon::simgpu {

/// Idempotent and thread-safe: the first call's result is every call's.
CUresult InitDriver();

}  // namespace chameleon::simgpu
