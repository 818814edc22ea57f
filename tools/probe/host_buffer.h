// Pinned host memory bound to one NUMA node, by the best means the driver and the kernel offer:
// VMM host-NUMA memory (cuMemCreate at CU_MEM_LOCATION_TYPE_HOST_NUMA; what simgpu models and
// CUDA >= 12.2 offers), else mmap + mbind(2) + cuMemHostRegister, else cuMemHostAlloc (unbound).
// Owns the buffer; not thread-safe.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <vector>

#include "probe_driver.h"

namespace chameleon::probe {

enum class Binding { kVmmHostNuma, kMbind, kUnbound };

/// "vmm-host-numa", "mbind" or "unbound", as printed in the table.
const char* BindingName(Binding binding);

class PinnedHostBuffer {
 public:
  /// `bytes` of pinned memory on `node` (< 0: no node known, unbound), usable by `devices`.
  /// Throws DriverError when not even cuMemHostAlloc succeeds.
  PinnedHostBuffer(const ProbeDriver& driver, int node, std::size_t bytes,
                   const std::vector<CUdevice>& devices);
  ~PinnedHostBuffer();
  PinnedHostBuffer(const PinnedHostBuffer&) = delete;
  PinnedHostBuffer& operator=(const PinnedHostBuffer&) = delete;

  void* data() const { return data_; }
  Binding binding() const { return binding_; }

 private:
  bool TryVmm(int node, const std::vector<CUdevice>& devices);
  bool TryMbind(int node);

  const ProbeDriver& driver_;
  std::size_t bytes_;
  std::size_t mapped_bytes_ = 0;             ///< VMM: the granularity-rounded size
  CUmemGenericAllocationHandle handle_ = 0;  ///< VMM only
  void* data_ = nullptr;
  Binding binding_ = Binding::kUnbound;
  bool registered_ = false;  ///< mmap + cuMemHostRegister path
};

}  // namespace chameleon::probe
