#include "tracker.h"

#include <vector>

namespace chameleon::shim {
namespace {

void AddBytes(Runtime& rt, std::uint16_t device, std::uint64_t bytes) {
  const std::uint16_t d = device < kMaxDevices ? device : 0;
  const std::uint64_t live = rt.device_live[d].fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (live > rt.device_peak[d].load(std::memory_order_relaxed)) {
    rt.device_peak[d].store(live, std::memory_order_relaxed);  // writers hold tracker_mu
  }
  const std::uint64_t total = rt.total_live.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  if (total > rt.total_peak.load(std::memory_order_relaxed)) {
    rt.total_peak.store(total, std::memory_order_relaxed);
  }
}

void SubBytes(Runtime& rt, std::uint16_t device, std::uint64_t bytes) {
  const std::uint16_t d = device < kMaxDevices ? device : 0;
  rt.device_live[d].fetch_sub(bytes, std::memory_order_relaxed);
  rt.total_live.fetch_sub(bytes, std::memory_order_relaxed);
}

void EmitFree(Runtime& rt, const AllocationState& s, std::uint64_t stream) {
  if (!rt.telemetry.active()) return;
  ipc::FreeRecord r{};
  r.id = s.id;
  r.stream = stream;
  rt.telemetry.PushEvent(ipc::RecordType::kFree, &r, sizeof(r));
}

}  // namespace

namespace {
// The calling thread's current device, or -1 when unknown. Asked of the driver once per thread and
// context switch, not per allocation: every driver call costs the program time (and on simgpu
// moves the virtual clock, which would show in a workload's own timings).
__thread int t_current_device __attribute__((tls_model("initial-exec"))) = -1;
}  // namespace

void InvalidateCurrentDevice() { t_current_device = -1; }

std::uint16_t CurrentDevice(const Runtime& rt) {
  if (t_current_device >= 0) return static_cast<std::uint16_t>(t_current_device);
  CUdevice dev = 0;
  if (rt.driver.aux.ctx_get_device == nullptr ||
      rt.driver.aux.ctx_get_device(&dev) != CUDA_SUCCESS || dev < 0) {
    return 0;  // no current context: do not cache, the program may set one later
  }
  t_current_device = dev;
  return static_cast<std::uint16_t>(dev);
}

AllocationState* TrackAlloc(Runtime& rt, std::uint64_t address, std::uint64_t bytes,
                            ipc::AllocKind kind, std::uint64_t stream, std::uint16_t device,
                            bool counts_device_bytes, int swappable) {
  AllocationState* s = rt.table.NewState();
  std::lock_guard<std::mutex> lock(rt.tracker_mu);
  s->id = rt.next_allocation_id++;
  s->address = address;
  s->bytes = bytes;
  s->stream = stream;
  s->device = device;
  s->kind = static_cast<std::uint8_t>(kind);
  if (swappable == 0 || (swappable < 0 && bytes < kSwapGranularity)) {
    s->flags.fetch_or(kNeverSwap, std::memory_order_relaxed);
  }
  if (!rt.table.Insert(s)) {
    rt.table.Recycle(s);
    return nullptr;
  }
  if (counts_device_bytes) AddBytes(rt, device, bytes);
  if (!rt.telemetry.active()) return s;
  ipc::AllocRecord r{};
  r.id = s->id;
  r.address = address;
  r.bytes = bytes;
  r.stream = stream;
  r.device = device;
  r.kind = s->kind;
  r.swappable = (s->flags.load(std::memory_order_relaxed) & kNeverSwap) ? 0 : 1;
  rt.telemetry.PushEvent(ipc::RecordType::kAlloc, &r, sizeof(r));
  return s;
}

void TrackFree(Runtime& rt, std::uint64_t address, std::uint64_t stream, bool counts_device_bytes) {
  std::lock_guard<std::mutex> lock(rt.tracker_mu);
  AllocationState* s = rt.table.Remove(address);
  if (s == nullptr) return;
  if (counts_device_bytes) SubBytes(rt, s->device, s->bytes);
  EmitFree(rt, *s, stream);
  rt.table.Recycle(s);
}

void TrackVmmCreate(Runtime& rt, CUmemGenericAllocationHandle handle, std::uint64_t bytes,
                    std::uint16_t device) {
  std::lock_guard<std::mutex> lock(rt.tracker_mu);
  rt.vmm_handles[handle] = VmmHandle{bytes, device, false};
  AddBytes(rt, device, bytes);
}

bool TrackVmmRelease(Runtime& rt, CUmemGenericAllocationHandle handle, VmmHandle* released) {
  std::lock_guard<std::mutex> lock(rt.tracker_mu);
  auto it = rt.vmm_handles.find(handle);
  if (it == rt.vmm_handles.end()) return false;
  SubBytes(rt, it->second.device, it->second.bytes);
  *released = it->second;
  rt.vmm_handles.erase(it);
  return true;
}

void TrackVmmMap(Runtime& rt, std::uint64_t address, std::uint64_t bytes,
                 CUmemGenericAllocationHandle handle, bool never_swap) {
  std::uint16_t device = 0;
  bool exported = false;
  {
    std::lock_guard<std::mutex> lock(rt.tracker_mu);
    auto it = rt.vmm_handles.find(handle);
    if (it != rt.vmm_handles.end()) {
      device = it->second.device;
      exported = it->second.exported;
    }
  }
  // Physical bytes were counted at cuMemCreate; the mapping is the visible "tensor". A driver
  // handle's mapping stays the program's: tracked, never swapped while the executor is on
  // (virtual handles are mapped by ProgramVmmMap instead).
  TrackAlloc(rt, address, bytes, ipc::AllocKind::kVmmMap, 0, device, false, never_swap ? 0 : -1);
  if (exported) MarkNeverSwapAddress(rt, address);
}

void TrackVmmUnmap(Runtime& rt, std::uint64_t address, std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(rt.tracker_mu);
  std::vector<AllocationState*> removed;
  rt.table.RemoveRange(address, address + bytes, &removed);
  for (AllocationState* s : removed) {
    EmitFree(rt, *s, 0);
    rt.table.Recycle(s);
  }
}

void MarkNeverSwapAddress(Runtime& rt, std::uint64_t address) {
  const AllocationHit hit = rt.table.Lookup(address);
  if (hit.state != nullptr) hit.state->flags.fetch_or(kNeverSwap, std::memory_order_relaxed);
}

void MarkNeverSwapHandle(Runtime& rt, CUmemGenericAllocationHandle handle) {
  std::lock_guard<std::mutex> lock(rt.tracker_mu);
  auto it = rt.vmm_handles.find(handle);
  if (it != rt.vmm_handles.end()) it->second.exported = true;
  // A driver handle's mappings get the flag at cuMemMap time. Virtual handles (program_vmm.h)
  // never get here: they cannot be exported.
}

void VmmTracker::Created(CUmemGenericAllocationHandle handle, std::uint64_t bytes,
                         std::uint16_t device) {
  TrackVmmCreate(rt_, handle, bytes, device);
}

void VmmTracker::Released(CUmemGenericAllocationHandle handle) {
  VmmHandle released;
  TrackVmmRelease(rt_, handle, &released);
}

AllocationState* VmmTracker::Mapped(std::uint64_t address, std::uint64_t bytes,
                                    std::uint16_t device) {
  return TrackAlloc(rt_, address, bytes, ipc::AllocKind::kVmmMap, 0, device, false,
                    /*swappable=*/1);
}

void VmmTracker::Unmapped(std::uint64_t address, std::uint64_t bytes) {
  TrackVmmUnmap(rt_, address, bytes);
}

}  // namespace chameleon::shim
