#include "program_vmm.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "alloc_table.h"
#include "log.h"
#include "program_vmm_registry.h"
#include "swap/swap_engine.h"

namespace chameleon::shim {
namespace program_vmm {
namespace {
bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}
}  // namespace

Registry& Reg() {
  static Registry* r = new Registry;  // lives as long as the process, like Runtime
  return *r;
}

// Fault injection for tests only: the unsound first-page-only rule (a named page alone).
bool FirstPageOnly() {
  static const bool on = EnvFlag("CHAMELEON_TEST_VMM_FIRST_PAGE_ONLY");
  return on;
}

std::map<CUdeviceptr, Mapping>::iterator Containing(Registry& reg, CUdeviceptr address) {
  auto it = reg.maps.upper_bound(address);
  if (it == reg.maps.begin()) return reg.maps.end();
  --it;
  return address - it->first < it->second.bytes ? it : reg.maps.end();
}

}  // namespace program_vmm

namespace {

using namespace program_vmm;

// CHAMELEON_PROGRAM_VMM=off: the program's VMM passes through (never swapped), as before.
bool VirtualisationOff() {
  static const bool off = [] {
    const char* v = std::getenv("CHAMELEON_PROGRAM_VMM");
    return v != nullptr && std::strcmp(v, "off") == 0;
  }();
  return off;
}

VirtualHandle* FindHandle(Registry& reg, CUmemGenericAllocationHandle handle) {
  auto it = reg.handles.find(handle);
  return it == reg.handles.end() ? nullptr : it->second;
}

bool Overlaps(Registry& reg, CUdeviceptr ptr, std::size_t bytes, bool virtual_only) {
  auto it = reg.maps.upper_bound(ptr);
  if (it != reg.maps.begin()) --it;
  for (; it != reg.maps.end() && it->first < ptr + bytes; ++it) {
    if (it->first + it->second.bytes <= ptr) continue;
    if (!virtual_only || it->second.vh != nullptr) return true;
  }
  return false;
}

// True when [ptr, ptr + bytes) is exactly a sequence of whole, adjacent mappings starting at ptr
// (what the driver requires of cuMemUnmap).
bool WholeMappings(Registry& reg, CUdeviceptr ptr, std::size_t bytes) {
  auto it = reg.maps.find(ptr);
  CUdeviceptr at = ptr;
  for (; it != reg.maps.end() && it->first == at && at < ptr + bytes; ++it) at += it->second.bytes;
  return bytes != 0 && at == ptr + bytes;
}

// True when every byte of [ptr, ptr + bytes) is mapped (what cuMemSetAccess requires).
bool FullyMapped(Registry& reg, CUdeviceptr ptr, std::size_t bytes) {
  auto it = Containing(reg, ptr);
  CUdeviceptr at = ptr;
  for (; it != reg.maps.end() && it->first <= at && at < ptr + bytes; ++it) {
    at = it->first + it->second.bytes;
  }
  return bytes != 0 && at >= ptr + bytes;
}

// Calls fn(begin, length) for each maximal stretch of driver mappings in [ptr, ptr + bytes).
template <typename Fn>
CUresult ForEachRealStretch(Registry& reg, CUdeviceptr ptr, std::size_t bytes, Fn&& fn) {
  const CUdeviceptr end = ptr + bytes;
  CUdeviceptr begin = 0, stretch_end = 0;
  bool open = false;
  auto flush = [&]() -> CUresult {
    if (!open) return CUDA_SUCCESS;
    open = false;
    return fn(begin, static_cast<std::size_t>(stretch_end - begin));
  };
  auto it = reg.maps.upper_bound(ptr);
  if (it != reg.maps.begin()) --it;
  for (; it != reg.maps.end() && it->first < end; ++it) {
    const CUdeviceptr lo = std::max(it->first, ptr);
    const CUdeviceptr hi = std::min(it->first + it->second.bytes, end);
    if (hi <= lo) continue;
    if (it->second.vh != nullptr || (open && lo != stretch_end)) {
      if (const CUresult r = flush(); r != CUDA_SUCCESS) return r;
    }
    if (it->second.vh != nullptr) continue;
    if (!open) begin = lo;
    open = true;
    stretch_end = hi;
  }
  return flush();
}

bool Coverable(const swap::SwapEngine& engine, int device, std::size_t bytes,
               const CUmemAllocationProp* prop, unsigned long long flags,
               CUmemGenericAllocationHandle* handle) {
  if (handle == nullptr || prop == nullptr || flags != 0 || bytes == 0) return false;
  const std::size_t chunk = engine.chunk_bytes();
  if (chunk == 0 || bytes % chunk != 0) return false;
  const auto& f = prop->allocFlags;
  bool reserved_zero = true;
  for (unsigned char b : f.reserved) reserved_zero = reserved_zero && b == 0;
  return prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
         prop->requestedHandleTypes == CU_MEM_HANDLE_TYPE_NONE &&
         prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE && prop->location.id == device &&
         prop->win32HandleMetaData == nullptr && f.compressionType == 0 &&
         f.gpuDirectRDMACapable == 0 && f.usage == 0 && reserved_zero;
}

}  // namespace

bool ProgramVmmIsVirtual(CUmemGenericAllocationHandle handle) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  return FindHandle(reg, handle) != nullptr;
}

bool ProgramVmmCreate(swap::SwapEngine& engine, int device, VmmBookkeeping& book,
                      CUmemGenericAllocationHandle* handle, std::size_t bytes,
                      const CUmemAllocationProp* prop, unsigned long long flags, CUresult* result) {
  if (VirtualisationOff() || !Coverable(engine, device, bytes, prop, flags, handle)) return false;
  auto* vh = new VirtualHandle;  // never freed: see VirtualHandle
  vh->bytes = bytes;
  vh->device = static_cast<std::uint16_t>(device);
  vh->prop = *prop;
  const auto value =
      static_cast<CUmemGenericAllocationHandle>(reinterpret_cast<std::uintptr_t>(vh));
  {
    Registry& reg = Reg();
    std::lock_guard lock(reg.mu);
    reg.handles[value] = vh;
  }
  book.Created(value, bytes, vh->device);  // the program's view; no physical memory yet
  *handle = value;
  *result = CUDA_SUCCESS;
  return true;
}

bool ProgramVmmRelease(swap::SwapEngine* engine, VmmBookkeeping& book,
                       CUmemGenericAllocationHandle handle, CUresult* result) {
  Registry& reg = Reg();
  std::unique_lock lock(reg.mu);
  VirtualHandle* vh = FindHandle(reg, handle);
  if (vh == nullptr) return false;
  *result = CUDA_SUCCESS;
  if (--vh->refs != 0) return true;
  reg.handles.erase(handle);
  // Still mapped: the memory goes with the last unmap, as the driver does it.
  if (!vh->mapped && vh->id != 0) {
    if (engine != nullptr) engine->Unadopt(vh->id, /*keep=*/false);
    vh->id = 0;
  }
  lock.unlock();
  book.Released(handle);
  return true;
}

CUresult ProgramVmmCheckRealMap(CUdeviceptr ptr, std::size_t bytes) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  return reg.virtual_maps != 0 && Overlaps(reg, ptr, bytes, false) ? CUDA_ERROR_INVALID_VALUE
                                                                   : CUDA_SUCCESS;
}

void ProgramVmmNoteRealMap(CUdeviceptr ptr, std::size_t bytes) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  reg.maps[ptr] = Mapping{bytes, nullptr, nullptr, 0};
}

void ProgramVmmForgetRealMaps(CUdeviceptr ptr, std::size_t bytes) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  reg.maps.erase(reg.maps.lower_bound(ptr), reg.maps.lower_bound(ptr + bytes));
}

bool ProgramVmmMap(swap::SwapEngine* engine, VmmBookkeeping& book, CUdeviceptr ptr,
                   std::size_t bytes, std::size_t offset, CUmemGenericAllocationHandle handle,
                   unsigned long long flags, CUresult* result) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  VirtualHandle* vh = FindHandle(reg, handle);
  if (vh == nullptr) return false;
  const std::size_t chunk = engine != nullptr ? engine->chunk_bytes() : 0;
  if (engine == nullptr || flags != 0 || bytes == 0 || offset % chunk != 0 || bytes % chunk != 0 ||
      ptr % chunk != 0 || offset > vh->bytes || bytes > vh->bytes - offset) {
    *result = CUDA_ERROR_INVALID_VALUE;
  } else if (offset != 0 || bytes != vh->bytes || vh->mapped) {
    // Valid for the driver, but a partial or second mapping would alias engine chunks.
    Log(LogLevel::kWarn,
        "program VMM: partial or repeated cuMemMap of a virtualised handle is not supported "
        "(CHAMELEON_PROGRAM_VMM=off passes the program's VMM through)");
    *result = CUDA_ERROR_NOT_SUPPORTED;
  } else if (Overlaps(reg, ptr, bytes, false)) {
    *result = CUDA_ERROR_INVALID_VALUE;  // the driver refuses mapping over a mapping
  } else if (vh->id != 0) {
    *result = engine->Rebind(vh->id, ptr, nullptr);  // parked contents, at the new VA
  } else {
    *result = engine->Adopt(ptr, bytes, &vh->id, nullptr);
  }
  if (*result != CUDA_SUCCESS) return true;
  AllocationState* s = book.Mapped(ptr, bytes, vh->device);
  if (s != nullptr) {
    s->flags.fetch_or(kProgramVmmPage, std::memory_order_relaxed);
    s->last_stream.store(UINT64_MAX, std::memory_order_relaxed);  // first use notes its stream
    s->executor_slot.store(reinterpret_cast<void*>(static_cast<std::uintptr_t>(vh->id)),
                           std::memory_order_release);
    engine->AttachFlags(vh->id, &s->flags);
  } else {
    // Untracked: no op could ever name it, so it must stay resident and settled.
    engine->SetPinned(vh->id, true);
    engine->FaultIn(vh->id);
  }
  vh->mapped = true;
  vh->va = ptr;
  reg.maps[ptr] = Mapping{bytes, vh, s, vh->id};
  ++reg.virtual_maps;
  return true;
}

bool ProgramVmmUnmap(swap::SwapEngine* engine, VmmBookkeeping& book, CUdeviceptr ptr,
                     std::size_t bytes, ProgramUnmapFn real, CUresult* result) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  if (reg.virtual_maps == 0 || !Overlaps(reg, ptr, bytes, true)) return false;
  if (engine == nullptr || !WholeMappings(reg, ptr, bytes)) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  *result = ForEachRealStretch(reg, ptr, bytes, [&](CUdeviceptr at, std::size_t len) {
    const CUresult r = real(at, len);
    if (r == CUDA_SUCCESS) {
      book.Unmapped(at, len);
      reg.maps.erase(reg.maps.lower_bound(at), reg.maps.lower_bound(at + len));
    }
    return r;
  });
  if (*result != CUDA_SUCCESS) return true;
  auto it = reg.maps.lower_bound(ptr);
  while (it != reg.maps.end() && it->first < ptr + bytes) {
    Mapping& m = it->second;
    VirtualHandle* vh = m.vh;
    // Keep the contents while the handle lives: the program may map it again elsewhere.
    const bool keep = vh->refs != 0;
    if (const CUresult r = engine->Unadopt(m.id, keep); r != CUDA_SUCCESS) {
      *result = r;
      return true;
    }
    book.Unmapped(it->first, m.bytes);
    vh->mapped = false;
    vh->va = 0;
    if (!keep) vh->id = 0;
    --reg.virtual_maps;
    it = reg.maps.erase(it);
  }
  return true;
}

bool ProgramVmmSetAccess(swap::SwapEngine* engine, int device, CUdeviceptr ptr, std::size_t bytes,
                         const CUmemAccessDesc* desc, std::size_t count, ProgramSetAccessFn real,
                         CUresult* result) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  if (reg.virtual_maps == 0 || !Overlaps(reg, ptr, bytes, true)) return false;
  if (engine == nullptr || desc == nullptr || count == 0 || !FullyMapped(reg, ptr, bytes)) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  for (std::size_t i = 0; i < count; ++i) {
    const CUmemLocationType t = desc[i].location.type;
    if (t != CU_MEM_LOCATION_TYPE_DEVICE && t != CU_MEM_LOCATION_TYPE_HOST &&
        t != CU_MEM_LOCATION_TYPE_HOST_NUMA && t != CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT) {
      *result = CUDA_ERROR_INVALID_VALUE;
      return true;
    }
  }
  const bool engine_default = count == 1 && desc[0].location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
                              desc[0].location.id == device &&
                              desc[0].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (engine_default) {
    // What the engine grants on every map: only the driver's own mappings need the call.
    *result = ForEachRealStretch(reg, ptr, bytes, [&](CUdeviceptr at, std::size_t len) {
      return real(at, len, desc, count);
    });
    return true;
  }
  // Other access (another device, read-only): a remap would lose it, so these pages stay put.
  for (auto it = Containing(reg, ptr); it != reg.maps.end() && it->first < ptr + bytes; ++it) {
    if (it->second.vh == nullptr) continue;
    engine->SetPinned(it->second.id, true);
    engine->FaultIn(it->second.id);
    if (it->second.state != nullptr) {
      it->second.state->flags.fetch_or(kNeverSwap, std::memory_order_relaxed);
    }
  }
  *result = real(ptr, bytes, desc, count);
  return true;
}

CUresult ProgramVmmCheckAddressFree(CUdeviceptr ptr, std::size_t bytes) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  return reg.virtual_maps != 0 && Overlaps(reg, ptr, bytes, true) ? CUDA_ERROR_INVALID_VALUE
                                                                  : CUDA_SUCCESS;
}

bool ProgramVmmProperties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle,
                          CUresult* result) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  const VirtualHandle* vh = FindHandle(reg, handle);
  if (vh == nullptr) return false;
  if (prop == nullptr) {
    *result = CUDA_ERROR_INVALID_VALUE;
  } else {
    *prop = vh->prop;
    *result = CUDA_SUCCESS;
  }
  return true;
}

bool ProgramVmmRetain(CUmemGenericAllocationHandle* handle, void* address, CUresult* result) {
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  if (reg.virtual_maps == 0) return false;
  auto it = Containing(reg, reinterpret_cast<CUdeviceptr>(address));
  if (it == reg.maps.end() || it->second.vh == nullptr) return false;
  if (handle == nullptr) {
    *result = CUDA_ERROR_INVALID_VALUE;
    return true;
  }
  VirtualHandle* vh = it->second.vh;
  const auto value =
      static_cast<CUmemGenericAllocationHandle>(reinterpret_cast<std::uintptr_t>(vh));
  if (vh->refs++ == 0) reg.handles[value] = vh;  // released but still mapped: live again
  *handle = value;
  *result = CUDA_SUCCESS;
  return true;
}

}  // namespace chameleon::shim
