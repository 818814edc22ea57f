// Internal to program_vmm*.cc: the registry of virtual handles and program mappings
// (program_vmm.h). Thread-safe through Registry::mu, which every user holds.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>

#include "alloc_table.h"
#include "swap/swap_engine.h"

namespace chameleon::shim::program_vmm {

// A virtual handle. Its address is the handle value the program sees: records are never freed,
// so a value is never reused, and it cannot equal a live driver handle (those are the driver's
// own objects, or small integers).
struct VirtualHandle {
  std::uint64_t bytes = 0;
  std::uint16_t device = 0;
  CUmemAllocationProp prop{};
  std::uint32_t refs = 1;  // cuMemCreate + cuMemRetainAllocationHandle - cuMemRelease
  bool mapped = false;     // mapped at `va` (at most once: no aliasing of engine chunks)
  CUdeviceptr va = 0;
  swap::AllocId id = 0;  // engine allocation (mapped, or parked after an unmap), 0 = none
};

// A program mapping: virtualised (`vh`) or the driver's own (`vh` null).
struct Mapping {
  std::uint64_t bytes = 0;
  VirtualHandle* vh = nullptr;
  AllocationState* state = nullptr;  // tracked state of a virtualised mapping (may be null)
  swap::AllocId id = 0;
};

struct Registry {
  std::mutex mu;
  std::unordered_map<std::uint64_t, VirtualHandle*> handles;  // live virtual handles
  std::map<CUdeviceptr, Mapping> maps;                        // every program mapping
  std::uint64_t virtual_maps = 0;                             // virtualised entries in maps
};

/// The process's registry (never destroyed, like Runtime).
Registry& Reg();
/// The mapping containing `address`, or maps.end(). Caller holds mu.
std::map<CUdeviceptr, Mapping>::iterator Containing(Registry& reg, CUdeviceptr address);
/// CHAMELEON_TEST_VMM_FIRST_PAGE_ONLY=1 (tests only): the unsound first-page-only rule.
bool FirstPageOnly();

}  // namespace chameleon::shim::program_vmm
