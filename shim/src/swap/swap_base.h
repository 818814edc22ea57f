// The low-level resources every part of the swap engine shares (driver table, fence and chunk
// pools, the VMM mapper, counters), and the clock the parts count their host waits with.
//
// Not thread-safe: a bundle of pointers to objects SwapEngine owns and uses under its mutex.
#pragma once

#include <chrono>
#include <cstdint>

#include "swap/chunk_pool.h"
#include "swap/counters.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

class VaMapper;

/// Handed by SwapEngine to each of its parts; every pointer outlives the parts.
struct SwapBase {
  const DriverApi* api = nullptr;
  FencePool* fences = nullptr;
  ChunkPool* chunks = nullptr;
  VaMapper* vmm = nullptr;
  SwapCounters* counters = nullptr;
};

inline std::uint64_t NowNs() {
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::steady_clock::now().time_since_epoch())
                                        .count());
}

/// One host wait by the engine that began at `t0_ns`: counted in stall_count and stall_ns.
inline void CountStall(SwapCounters* counters, std::uint64_t t0_ns) {
  counters->Add(counters->stall_count);
  counters->Add(counters->stall_ns, NowNs() - t0_ns);
}

}  // namespace chameleon::shim::swap
