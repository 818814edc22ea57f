#include "vmm.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "driver.h"
#include "slab.h"
#include "stream.h"

namespace chameleon::simgpu {
namespace {

bool HostLocation(CUmemLocationType t) {
  return t == CU_MEM_LOCATION_TYPE_HOST || t == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         t == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

void DropRef(Chunk* c) {
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (c->in_slab)
    Slabs::Give(SlabRange{c->fd, c->base}, c->size);
  else
    close(c->fd);
  c->fd = -1;
  if (c->charged == 0) return;  // imported: the exporter pays
  if (c->host)
    SubPinned(c->charged);
  else
    TheDriver()->devices[static_cast<std::size_t>(c->device)]->Uncharge(c->charged, c->epoch);
  // The Chunk struct itself is kept (magic already 0) so stale handles stay detectable.
}

// The reservation fully containing [ptr, ptr + size), or null.
Reservation* FindReservation(CUdeviceptr ptr, std::size_t size) {
  auto r = TheDriver()->registry.Find(ptr);
  if (!r || r->kind != RangeKind::kReservation) return nullptr;
  if (size > r->size || ptr - r->base > r->size - size) return nullptr;
  return r->reservation;
}

// This process's ordinal for node device `node` (the exporter may see other ordinals), else 0.
int OrdinalOfNodeDevice(int node) {
  for (const auto& dev : TheDriver()->devices)
    if (dev->node_index == node) return dev->ordinal;
  return 0;
}

// Node device recorded in a memfd's name ("simgpu-dev3" / "simgpu-host0"), for imported handles.
void ParseMemfdName(int fd, Chunk* c) {
  char path[64];
  char target[128] = {};
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return;
  int id = 0;
  if (std::sscanf(target, "/memfd:simgpu-dev%d", &id) == 1) {
    c->device = OrdinalOfNodeDevice(id);
  } else if (std::sscanf(target, "/memfd:simgpu-host%d", &id) == 1) {
    c->host = true;
    c->device = id;
    c->numa = id >= 0 && id < TheDriver()->numa_count ? id : -1;
  }
}

}  // namespace

// Handles are plain integers to the caller, so they are checked against the set of chunks ever
// created before being dereferenced.
std::mutex g_chunks_mu;
std::unordered_set<Chunk*>* g_chunks = new std::unordered_set<Chunk*>;

Chunk* NewChunk() {
  auto* c = new Chunk;  // never freed: stale handles must stay checkable
  std::lock_guard lock(g_chunks_mu);
  g_chunks->insert(c);
  return c;
}

Chunk* AsChunk(CUmemGenericAllocationHandle handle) {
  auto* c = reinterpret_cast<Chunk*>(handle);
  {
    std::lock_guard lock(g_chunks_mu);
    if (!g_chunks->count(c)) return nullptr;
  }
  if (c->magic.load(std::memory_order_acquire) != kChunkMagic) return nullptr;
  return c;
}

CUresult VmmReserve(CUdeviceptr* ptr, std::size_t size, std::size_t alignment, CUdeviceptr hint) {
  if (!ptr || size == 0 || size % kVmmGranularity) return CUDA_ERROR_INVALID_VALUE;
  if (alignment == 0) alignment = kVmmGranularity;
  if (alignment & (alignment - 1)) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t span = size + alignment;
  void* p = mmap(reinterpret_cast<void*>(hint), span, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  auto raw = reinterpret_cast<std::uintptr_t>(p);
  std::uintptr_t base = (raw + alignment - 1) & ~(alignment - 1);
  if (base > raw) munmap(p, base - raw);
  if (raw + span > base + size)
    munmap(reinterpret_cast<void*>(base + size), raw + span - base - size);
  static std::mutex mu;
  static auto* all = new std::vector<Reservation*>;  // never freed: readers may hold the pointer
  auto* res = new Reservation;
  {
    std::lock_guard lock(mu);
    all->push_back(res);
  }
  res->base = base;
  res->size = size;
  Range r;
  r.base = base;
  r.size = size;
  r.kind = RangeKind::kReservation;
  r.reservation = res;
  TheDriver()->registry.Add(r);
  *ptr = base;
  return CUDA_SUCCESS;
}

CUresult VmmFree(CUdeviceptr ptr, std::size_t size) {
  auto r = TheDriver()->registry.Find(ptr);
  if (!r || r->kind != RangeKind::kReservation || r->base != ptr || r->size != size)
    return CUDA_ERROR_INVALID_VALUE;
  {
    std::lock_guard lock(r->reservation->mu);
    if (!r->reservation->maps.empty()) return CUDA_ERROR_INVALID_VALUE;  // unmap first
  }
  TheDriver()->registry.Remove(ptr, nullptr);
  munmap(reinterpret_cast<void*>(ptr), size);
  return CUDA_SUCCESS;
}

CUresult VmmCreate(CUmemGenericAllocationHandle* handle, std::size_t size,
                   const CUmemAllocationProp* prop) {
  if (!handle || !prop || size == 0 || size % kVmmGranularity) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  const bool host = HostLocation(prop->location.type);
  Driver* d = TheDriver();
  if (!host && (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
                prop->location.id >= static_cast<int>(d->devices.size())))
    return CUDA_ERROR_INVALID_DEVICE;
  // Host NUMA memory must be on a node the machine has; its node then decides which copies cross
  // the inter-socket link. CU_MEM_LOCATION_TYPE_HOST(_NUMA_CURRENT) is local to the copier.
  const bool numa = prop->location.type == CU_MEM_LOCATION_TYPE_HOST_NUMA;
  if (numa && (prop->location.id < 0 || prop->location.id >= d->numa_count))
    return CUDA_ERROR_INVALID_VALUE;
  const int id = host ? std::max(prop->location.id, 0) : prop->location.id;
  // A device chunk's file is named for the node device, which every process of the node agrees
  // on (an importer with other CUDA_VISIBLE_DEVICES maps it back to its own ordinal).
  const int named = host ? id : d->devices[static_cast<std::size_t>(id)]->node_index;
  std::string name = (host ? "simgpu-host" : "simgpu-dev") + std::to_string(named);
  auto* c = NewChunk();
  c->size = size;
  c->host = host;
  c->device = id;
  c->numa = numa ? id : -1;
  c->prop = *prop;
  if (!host) {
    if (!d->devices[static_cast<std::size_t>(id)]->Charge(size)) {
      c->magic = 0;
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    c->charged = size;
    c->epoch = ChargeEpoch();
  } else {
    AddPinned(size);
    c->charged = size;
  }
  // Only a chunk that may be exported needs a file of its own; the rest share their location's
  // slab, so that holding many chunks does not take one descriptor each.
  SlabRange range;
  if ((prop->requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) == 0 &&
      Slabs::Take(host, id, size, &range)) {
    c->fd = range.fd;
    c->base = range.base;
    c->in_slab = true;
  } else {
    c->fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  }
  if (c->fd < 0 || (!c->in_slab && ftruncate(c->fd, static_cast<off_t>(size)) != 0)) {
    c->magic = 0;
    DropRef(c);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(c);
  return CUDA_SUCCESS;
}

CUresult VmmRelease(CUmemGenericAllocationHandle handle) {
  Chunk* c = AsChunk(handle);
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  std::uint32_t expected = kChunkMagic;
  if (!c->magic.compare_exchange_strong(expected, 0)) return CUDA_ERROR_INVALID_VALUE;
  DropRef(c);  // physical memory goes once the last mapping is unmapped
  return CUDA_SUCCESS;
}

CUresult VmmMap(CUdeviceptr ptr, std::size_t size, std::size_t offset,
                CUmemGenericAllocationHandle handle) {
  Chunk* c = AsChunk(handle);
  if (!c) return CUDA_ERROR_INVALID_HANDLE;
  if (size == 0 || size % kVmmGranularity || ptr % kVmmGranularity || offset % kVmmGranularity ||
      offset > c->size || size > c->size - offset)
    return CUDA_ERROR_INVALID_VALUE;
  Reservation* res = FindReservation(ptr, size);
  if (!res) return CUDA_ERROR_INVALID_VALUE;
  const std::size_t at = ptr - res->base;
  std::lock_guard lock(res->mu);
  auto next = res->maps.lower_bound(at);
  if (next != res->maps.end() && next->first < at + size) return CUDA_ERROR_INVALID_VALUE;
  if (next != res->maps.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.size > at) return CUDA_ERROR_INVALID_VALUE;
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED, c->fd,
                 static_cast<off_t>(c->base + offset));
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  c->refs.fetch_add(1, std::memory_order_acq_rel);
  res->maps.emplace(at, Reservation::Mapping{size, c, offset});
  return CUDA_SUCCESS;
}

CUresult VmmUnmap(CUdeviceptr ptr, std::size_t size) {
  Reservation* res = FindReservation(ptr, size);
  if (!res || size == 0) return CUDA_ERROR_INVALID_VALUE;
  // Synchronising, as the driver documents: no queued work may still use the range.
  SynchronizeAll();
  const std::size_t at = ptr - res->base;
  std::lock_guard lock(res->mu);
  auto it = res->maps.find(at);
  if (it == res->maps.end()) return CUDA_ERROR_INVALID_VALUE;
  std::size_t covered = 0;
  auto end = it;
  while (end != res->maps.end() && end->first == at + covered && covered < size) {
    covered += end->second.size;
    ++end;
  }
  if (covered != size) return CUDA_ERROR_INVALID_VALUE;  // must cover whole mappings
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_UNKNOWN;
  for (auto m = it; m != end; ++m) DropRef(m->second.chunk);
  res->maps.erase(it, end);
  return CUDA_SUCCESS;
}

CUresult VmmSetAccess(CUdeviceptr ptr, std::size_t size, const CUmemAccessDesc* desc,
                      std::size_t count) {
  if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
  Reservation* res = FindReservation(ptr, size);
  if (!res) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (std::size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE &&
        !HostLocation(desc[i].location.type))
      return CUDA_ERROR_INVALID_VALUE;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
      prot = PROT_READ;
  }
  std::lock_guard lock(res->mu);
  // The whole range must be mapped.
  std::size_t at = ptr - res->base;
  std::size_t covered = 0;
  auto it = res->maps.upper_bound(at);
  if (it == res->maps.begin()) return CUDA_ERROR_INVALID_VALUE;
  --it;
  for (std::size_t pos = at; pos < at + size; ++it) {
    if (it == res->maps.end() || it->first > pos || it->first + it->second.size <= pos)
      return CUDA_ERROR_INVALID_VALUE;
    covered = it->first + it->second.size - pos;
    pos += covered;
  }
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult VmmExport(void* out, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type) {
  Chunk* c = AsChunk(handle);
  if (!c || !out) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  // As the driver does for a handle created without shareable types; a slab chunk's fd is the
  // whole location's memory, so it must never leave the process anyway.
  if (c->in_slab) return CUDA_ERROR_NOT_PERMITTED;
  int fd = dup(c->fd);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  *static_cast<int*>(out) = fd;
  return CUDA_SUCCESS;
}

CUresult VmmImport(CUmemGenericAllocationHandle* handle, void* os_handle,
                   CUmemAllocationHandleType type) {
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = static_cast<int>(reinterpret_cast<std::intptr_t>(os_handle));
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) return CUDA_ERROR_INVALID_VALUE;
  auto* c = NewChunk();
  c->fd = dup(fd);
  if (c->fd < 0) {
    c->magic = 0;
    return CUDA_ERROR_INVALID_VALUE;
  }
  c->size = static_cast<std::size_t>(st.st_size);
  c->device = 0;
  ParseMemfdName(fd, c);
  c->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  c->prop.location.type = c->host ? CU_MEM_LOCATION_TYPE_HOST_NUMA : CU_MEM_LOCATION_TYPE_DEVICE;
  c->prop.location.id = c->device;
  c->prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  // Not charged: the exporter already paid for this physical memory.
  *handle = reinterpret_cast<CUmemGenericAllocationHandle>(c);
  return CUDA_SUCCESS;
}

}  // namespace chameleon::simgpu
