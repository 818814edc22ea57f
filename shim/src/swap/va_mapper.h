// VaMapper: maps pooled chunks at VA ranges and unmaps, reserves and frees ranges, counting
// every such driver VMM call by kind (SwapCounters::Vmm) so that all parts count them alike.
//
// Not thread-safe: it holds no state of its own, but reads ChunkPool handles; used under
// SwapEngine's mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "swap/chunk_pool.h"
#include "swap/counters.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

class VaMapper {
 public:
  VaMapper(const DriverApi* api, const ChunkPool* chunks, SwapCounters* counters, int device)
      : api_(api), chunks_(chunks), counters_(counters), device_(device) {}

  /// Maps `chunks` back to back at `va` and grants the device read-write access (one
  /// cuMemSetAccess over the range). All or nothing: on failure nothing stays mapped.
  CUresult Map(CUdeviceptr va, const std::vector<std::uint32_t>& chunks);
  /// cuMemUnmap of [va, va + span); also counted in `unmaps`.
  CUresult Unmap(CUdeviceptr va, std::size_t span);
  /// A chunk-aligned reservation of `span` bytes.
  CUresult Reserve(CUdeviceptr* va, std::size_t span);
  /// Gives a reservation back to the driver.
  void FreeAddress(CUdeviceptr va, std::size_t span);

  int device() const { return device_; }
  std::size_t chunk_bytes() const { return chunks_->chunk_bytes(); }

 private:
  const DriverApi* api_;
  const ChunkPool* chunks_;
  SwapCounters* counters_;
  int device_;
};

}  // namespace chameleon::shim::swap
