// VaMapper: maps pooled chunks at VA ranges and unmaps, reserves and frees ranges, counting
// every such driver VMM call by kind (SwapCounters::Vmm) so that all parts count them alike.
//
// It also keeps which chunks each range it mapped holds, and counts them in the ChunkPool
// (AddMapping/DropMapping), so that a trim can tell the pooled chunks that no stale range maps
// any more: those give their memory back without an unmap (which synchronises the device).
//
// Not thread-safe: used under SwapEngine's mutex.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "swap/chunk_pool.h"
#include "swap/counters.h"
#include "swap/driver_api.h"

namespace chameleon::shim::swap {

class VaMapper {
 public:
  VaMapper(const DriverApi* api, ChunkPool* chunks, SwapCounters* counters, int device)
      : api_(api), chunks_(chunks), counters_(counters), device_(device) {}

  /// Maps `chunks` back to back at `va` and grants the device read-write access (one
  /// cuMemSetAccess over the range). All or nothing: on failure nothing stays mapped.
  CUresult Map(CUdeviceptr va, const std::vector<std::uint32_t>& chunks);
  /// cuMemUnmap of [va, va + span); also counted in `unmaps`. The chunks a range Map put there
  /// lose that mapping (a range mapped otherwise — host memory — has none to lose).
  CUresult Unmap(CUdeviceptr va, std::size_t span);
  /// A chunk-aligned reservation of `span` bytes.
  CUresult Reserve(CUdeviceptr* va, std::size_t span);
  /// Gives a reservation back to the driver.
  void FreeAddress(CUdeviceptr va, std::size_t span);

  int device() const { return device_; }
  std::size_t chunk_bytes() const { return chunks_->chunk_bytes(); }

 private:
  const DriverApi* api_;
  ChunkPool* chunks_;
  SwapCounters* counters_;
  int device_;
  /// Ranges Map mapped and nobody unmapped yet, by start: the chunks and their handles
  /// (incarnations).
  std::map<CUdeviceptr, std::vector<std::pair<std::uint32_t, CUmemGenericAllocationHandle>>>
      mapped_;
  /// Drops the ranges Map recorded that start in [va, va + span).
  void Forget(CUdeviceptr va, std::size_t span);
};

}  // namespace chameleon::shim::swap
