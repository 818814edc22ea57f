// Copies and memsets. Each becomes one stream operation timed as bytes / link bandwidth (sharing
// the link with overlapping copies); host-synchronising variants then wait for it.
#include <cstring>

#include "api.h"
#include "fault_hook.h"
#include "sparse_copy.h"

using namespace chameleon::simgpu;

namespace {

enum class HostWait { kNever, kAlways, kIfHost, kIfPageable };

struct Endpoint {
  Place place;
  int device = -1;
  int numa = -1;  ///< pinned host memory's NUMA node; -1: local to the copying device
};

// `fallback`: the device charged for an unmapped VMM range (whose device is unknowable).
Endpoint Where(CUdeviceptr p, int fallback) {
  Endpoint e;
  e.place = TheDriver()->registry.Classify(p, &e.device, &e.numa);
  if (e.device < 0) e.device = fallback;
  return e;
}

bool OnDevice(const Endpoint& e) {
  return e.place == Place::kDevice || e.place == Place::kUnmappedDevice;
}

Device* Dev(int i) { return TheDriver()->devices[static_cast<std::size_t>(i)].get(); }

int DeviceNuma(int i) { return TheDriver()->config.numa_node[static_cast<std::size_t>(i)]; }

// Host memory on another NUMA node than the device's: the copy also crosses the inter-socket
// link from `from` to `to`, shared with every other copy crossing it (docs/simgpu.md).
void CrossSocket(int from, int to, OpCost* c) {
  const double bw = TheDriver()->config.numa_link_bandwidth;
  Link* link = from >= 0 && bw > 0 ? NumaLink(from, to) : nullptr;
  if (!link) return;
  c->link2 = link;
  c->bandwidth2 = bw;
}

// Picks the link and bandwidth that a copy of n bytes from src to dst uses (docs/simgpu.md).
OpCost CopyCost(const Endpoint& dst, const Endpoint& src, std::size_t n) {
  const Config& cfg = TheDriver()->config;
  OpCost c;
  c.kind = OpCost::Kind::kCopy;
  c.bytes = static_cast<double>(n);
  // Each host-link direction has its own figure (PCIe Gen5 reads and writes differ by ~15 %).
  const double h2d = cfg.host_to_device_bandwidth;
  const double d2h = cfg.device_to_host_bandwidth;
  const bool pageable = src.place == Place::kPageableHost || dst.place == Place::kPageableHost;
  if (OnDevice(src) && OnDevice(dst)) {
    if (src.device == dst.device) {
      c.bytes = 2.0 * static_cast<double>(n);  // read + write of the same HBM
      c.bandwidth = cfg.hbm_bandwidth;
    } else if (double bw = cfg.peer_bandwidth[static_cast<std::size_t>(src.device)]
                                             [static_cast<std::size_t>(dst.device)];
               bw > 0) {
      c.bandwidth = bw;
      c.link = &Dev(src.device)->peer_out[static_cast<std::size_t>(dst.device)];
    } else {
      c.bandwidth = cfg.host_link_bandwidth();  // staged through host memory: both directions
      c.link = &Dev(src.device)->d2h;
    }
  } else if (OnDevice(dst)) {
    c.bandwidth = pageable ? h2d / 2 : h2d;
    c.link = &Dev(dst.device)->h2d;
    CrossSocket(src.numa, DeviceNuma(dst.device), &c);
  } else if (OnDevice(src)) {
    c.bandwidth = pageable ? d2h / 2 : d2h;
    c.link = &Dev(src.device)->d2h;
    if (dst.numa >= 0) CrossSocket(DeviceNuma(src.device), dst.numa, &c);
  } else {
    c.bandwidth = h2d;  // host to host: a memcpy at roughly host-link speed
  }
  return c;
}

CUresult Copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream h, bool pt, HostWait wait) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  const int own = s->ctx()->device->ordinal;
  const Endpoint d = Where(dst, own);
  const Endpoint sr = Where(src, own);
  OpSpec op;
  op.cost = CopyCost(d, sr, n);
  // Sparse memory (docs/simgpu.md): only written source extents move; the time is still that of
  // n bytes. The backing is looked up now, while a cuMemFreeAsync queued later cannot have
  // unregistered either range yet.
  const Backing db = BackingOf(dst, n);
  const Backing sb = BackingOf(src, n);
  const FaultChoice fault =
      OnDevice(d) && sr.place == Place::kPinnedHost ? FaultHookChoose(n) : FaultChoice{};
  op.work = [dst, src, n, db, sb, fault] {
    LandDelayedBytes(src, n);  // the delay hook's bytes reach a range before a copy reads it
    SparseMove(dst, db, src, sb, n, fault.skip);
    if (fault.delay)
      HoldDelayedBytes(dst + fault.skip.begin, src + fault.skip.begin,
                       fault.skip.end - fault.skip.begin);
  };
  SIMGPU_TRY(s->Submit(std::move(op)));
  const bool host = !OnDevice(d) || !OnDevice(sr);
  const bool pageable = d.place == Place::kPageableHost || sr.place == Place::kPageableHost;
  if (wait == HostWait::kAlways || (wait == HostWait::kIfHost && host) ||
      (wait == HostWait::kIfPageable && pageable)) {
    s->Synchronize();
    return s->ctx()->Sticky();
  }
  return CUDA_SUCCESS;
}

template <typename T>
CUresult Memset(CUdeviceptr dst, T value, std::size_t count, CUstream h, bool pt, bool sync) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  if (count == 0) return CUDA_SUCCESS;
  if (!dst || dst % sizeof(T)) return CUDA_ERROR_INVALID_VALUE;
  const Endpoint d = Where(dst, s->ctx()->device->ordinal);
  const Config& cfg = TheDriver()->config;
  OpSpec op;
  op.cost.kind = OpCost::Kind::kCopy;
  op.cost.bytes = static_cast<double>(count * sizeof(T));
  // A memset of host memory is the device writing over the link.
  op.cost.bandwidth = OnDevice(d) ? cfg.hbm_bandwidth : cfg.device_to_host_bandwidth;
  const Backing db = BackingOf(dst, count * sizeof(T));
  op.work = [dst, value, count, db] {
    T* p = reinterpret_cast<T*>(dst);
    // Zeroes drop written pages instead of committing fresh ones (sparse memory).
    if (value == 0 && SparseZero(dst, db, count * sizeof(T))) return;
    if constexpr (sizeof(T) == 1) {
      std::memset(p, value, count);
    } else {
      for (std::size_t i = 0; i < count; ++i) p[i] = value;
    }
  };
  SIMGPU_TRY(s->Submit(std::move(op)));
  // Memsets of device memory are asynchronous to the host even in the "synchronous" API.
  if (sync && !OnDevice(d)) {
    s->Synchronize();
    return s->ctx()->Sticky();
  }
  return CUDA_SUCCESS;
}

CUdeviceptr P(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

// simgpuMemDiscardAsync: the range's contents are dead, so its written pages are dropped in
// stream order (reads return zeros, host RAM is released) at no virtual time — on a GPU a
// discard is bookkeeping, not a write. Refused on a capturing stream: a graph replaying it
// later would drop whatever the range holds then.
CUresult Discard(CUdeviceptr dst, std::size_t n, CUstream h) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, false, &s));
  if (n == 0) return CUDA_SUCCESS;
  if (!dst) return CUDA_ERROR_INVALID_VALUE;
  if (s->capturing()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  const Backing db = BackingOf(dst, n);
  if (db.kind == Backing::Kind::kForeign) return CUDA_ERROR_INVALID_VALUE;
  OpSpec op;  // cost kind kNone: no virtual time
  op.work = [dst, n, db] { SparseDiscard(dst, db, n); };
  return s->Submit(std::move(op));
}

}  // namespace

// ---- Synchronous copies (legacy default stream, or the per-thread stream for _ptds). ----
SIMGPU_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, P(src), n, nullptr, false, HostWait::kAlways);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, P(src), n, nullptr, true, HostWait::kAlways);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(P(dst), src, n, nullptr, false, HostWait::kAlways);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(P(dst), src, n, nullptr, true, HostWait::kAlways);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, nullptr, false, HostWait::kNever);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, nullptr, true, HostWait::kNever);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, nullptr, false, HostWait::kIfHost);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, nullptr, true, HostWait::kIfHost);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                 size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, nullptr, false, HostWait::kIfHost);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                      size_t n) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, nullptr, true, HostWait::kIfHost);
}
SIMGPU_CATCH

// ---- Asynchronous copies. Pageable host memory makes them host-synchronous, as in CUDA. ----
SIMGPU_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n,
                                         CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, P(src), n, s, false, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n,
                                              CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, P(src), n, s, true, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(P(dst), src, n, s, false, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t n,
                                              CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(P(dst), src, n, s, true, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                         CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, s, false, HostWait::kNever);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n,
                                              CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, s, true, HostWait::kNever);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, s, false, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, s, true, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                      size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, s, false, HostWait::kIfPageable);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext,
                                           size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Copy(dst, src, n, s, true, HostWait::kIfPageable);
}
SIMGPU_CATCH

// ---- Memsets. ----
SIMGPU_API CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) try {
  SIMGPU_ENTRY();
  return Memset<unsigned char>(dst, v, n, nullptr, false, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dst, unsigned char v, size_t n) try {
  SIMGPU_ENTRY();
  return Memset<unsigned char>(dst, v, n, nullptr, true, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) try {
  SIMGPU_ENTRY();
  return Memset<unsigned short>(dst, v, n, nullptr, false, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dst, unsigned short v, size_t n) try {
  SIMGPU_ENTRY();
  return Memset<unsigned short>(dst, v, n, nullptr, true, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) try {
  SIMGPU_ENTRY();
  return Memset<unsigned int>(dst, v, n, nullptr, false, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dst, unsigned int v, size_t n) try {
  SIMGPU_ENTRY();
  return Memset<unsigned int>(dst, v, n, nullptr, true, true);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Memset<unsigned char>(dst, v, n, s, false, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dst, unsigned char v, size_t n,
                                         CUstream s) try {
  SIMGPU_ENTRY();
  return Memset<unsigned char>(dst, v, n, s, true, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Memset<unsigned short>(dst, v, n, s, false, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dst, unsigned short v, size_t n,
                                          CUstream s) try {
  SIMGPU_ENTRY();
  return Memset<unsigned short>(dst, v, n, s, true, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) try {
  SIMGPU_ENTRY();
  return Memset<unsigned int>(dst, v, n, s, false, false);
}
SIMGPU_CATCH
SIMGPU_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dst, unsigned int v, size_t n,
                                          CUstream s) try {
  SIMGPU_ENTRY();
  return Memset<unsigned int>(dst, v, n, s, true, false);
}
SIMGPU_CATCH

// ---- simgpu extension (chameleon/simgpu/control.h): no host-clock tick, like the other
// simgpu* entry points, so that a shim that discards leaves virtual time unchanged. ----
SIMGPU_API int simgpuMemDiscardAsync(std::uint64_t dst, std::size_t n, void* stream) try {
  SIMGPU_ENTRY_NO_TICK();
  return Discard(dst, n, static_cast<CUstream>(stream));
}
SIMGPU_CATCH
