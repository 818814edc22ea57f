#include "sparse_copy.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "driver.h"
#include "reservation.h"
#include "written_extents.h"

namespace chameleon::simgpu {
namespace {

constexpr int kForeignFd = -2;    // Seg::fd of memory simgpu does not own
constexpr int kAnonymousFd = -1;  // Seg::fd of private anonymous memory
// A discarded run of VMM chunks written at most 1/kSparseDivisor has its written pages zeroed in
// place (SparseDiscard). 64: the model-shaped trainer writes one page in 512, a replay at a 1 MiB
// sample stride two.
constexpr std::size_t kSparseDivisor = 64;

// A stretch of an endpoint with one backing store.
struct Seg {
  std::uintptr_t addr;
  std::size_t len;
  int fd;                     // kForeignFd, kAnonymousFd or the memfd of a VMM chunk
  std::uint64_t file_offset;  // for a memfd
};

// Per-worker scratch, so that steady-state copies allocate nothing (and a fault inside a copy,
// which abandons the frame, leaks nothing).
thread_local std::vector<Seg> t_segs;
thread_local std::vector<Extent> t_src;
thread_local std::vector<Extent> t_dst;
thread_local std::vector<Reservation::Piece> t_pieces;

void Segments(std::uintptr_t addr, std::size_t n, const Backing& b, std::vector<Seg>* out) {
  out->clear();
  if (b.kind == Backing::Kind::kAnonymous) {
    out->push_back(Seg{addr, n, kAnonymousFd, 0});
    return;
  }
  t_pieces.clear();
  if (b.kind == Backing::Kind::kReservation &&
      b.reservation->PiecesIn(addr - b.reservation_base, n, &t_pieces)) {
    for (const auto& p : t_pieces)
      out->push_back(Seg{b.reservation_base + p.at, p.len, p.fd, p.file_offset});
    return;
  }
  out->push_back(Seg{addr, n, kForeignFd, 0});  // or partly unmapped: the copy faults as before
}

// Appends the written extents of [addr, addr + len) of `seg` (the whole range if unknown).
void Written(const Seg& seg, std::uintptr_t addr, std::size_t len, std::vector<Extent>* out) {
  bool ok = false;
  if (seg.fd == kAnonymousFd) {
    ok = WrittenExtents::ScanAnonymous(addr, len, out);
  } else if (seg.fd >= 0) {
    ok = WrittenExtents::ScanMemfd(seg.fd, seg.file_offset + (addr - seg.addr), addr, len, out);
  }
  if (!ok) out->push_back(Extent{addr, addr + len});
}

// Calls fn(begin, end) for the parts of [begin, end) outside [skip_begin, skip_end).
template <typename Fn>
void Outside(std::uintptr_t begin, std::uintptr_t end, std::uintptr_t skip_begin,
             std::uintptr_t skip_end, Fn fn) {
  if (skip_begin >= skip_end || end <= skip_begin || begin >= skip_end) {
    if (begin < end) fn(begin, end);
    return;
  }
  if (begin < skip_begin) fn(begin, skip_begin);
  if (skip_end < end) fn(skip_end, end);
}

// Zeroes [x, y) of `seg`: whole pages are dropped (private anonymous memory reads back as zeros
// after MADV_DONTNEED; MADV_REMOVE punches the hole into a memfd), partial pages written.
void Clear(const Seg& seg, std::uintptr_t x, std::uintptr_t y) {
  const std::uintptr_t page = WrittenExtents::PageSize();
  const std::uintptr_t px = (x + page - 1) / page * page;
  const std::uintptr_t py = y / page * page;
  if (seg.fd == kForeignFd || px >= py) {
    std::memset(reinterpret_cast<void*>(x), 0, y - x);
    return;
  }
  const int advice = seg.fd == kAnonymousFd ? MADV_DONTNEED : MADV_REMOVE;
  if (madvise(reinterpret_cast<void*>(px), py - px, advice) != 0)
    std::memset(reinterpret_cast<void*>(px), 0, py - px);
  std::memset(reinterpret_cast<void*>(x), 0, px - x);
  std::memset(reinterpret_cast<void*>(py), 0, y - py);
}

// Makes [a, b) of the destination read as zeros, touching only pages that hold data.
void Hole(const std::vector<Seg>& dst, std::uintptr_t a, std::uintptr_t b, std::uintptr_t sb,
          std::uintptr_t se) {
  for (const Seg& seg : dst) {
    const std::uintptr_t x = std::max(a, seg.addr);
    const std::uintptr_t y = std::min(b, seg.addr + seg.len);
    if (x >= y) continue;
    t_dst.clear();
    Written(seg, x, y - x, &t_dst);
    for (const Extent& e : t_dst)
      Outside(e.begin, e.end, sb, se, [&](auto p, auto q) { Clear(seg, p, q); });
  }
}

// Makes the destination bytes opposite the source's gaps read as zeros: the destination's
// written extents are read once per segment (not once per gap: a sparse source has a gap per
// written page, and each scan is a few syscalls), then what lies outside the copied source
// extents `src` (shifted by `delta` = dst - src) is cleared.
void Holes(const std::vector<Seg>& dst, const std::vector<Extent>& src, std::uintptr_t delta,
           std::uintptr_t sb, std::uintptr_t se) {
  for (const Seg& seg : dst) {
    t_dst.clear();
    Written(seg, seg.addr, seg.len, &t_dst);
    std::size_t k = 0;  // first source extent that may overlap the current destination extent
    for (const Extent& e : t_dst) {
      std::uintptr_t at = e.begin;
      while (k < src.size() && src[k].end + delta <= at) ++k;
      for (std::size_t j = k; at < e.end && j < src.size() && src[j].begin + delta < e.end; ++j) {
        const std::uintptr_t cb = src[j].begin + delta, ce = src[j].end + delta;
        if (cb > at) Outside(at, cb, sb, se, [&](auto p, auto q) { Clear(seg, p, q); });
        at = std::max(at, ce);
      }
      if (at < e.end) Outside(at, e.end, sb, se, [&](auto p, auto q) { Clear(seg, p, q); });
    }
  }
}

// The written extents of segments [first, last) of t_segs into t_dst, unless they hold more than
// `budget` bytes (then false, part of them listed; an unreadable segment counts whole).
bool SparseExtents(std::size_t first, std::size_t last, std::size_t budget) {
  t_dst.clear();
  std::size_t written = 0;
  for (std::size_t i = first; i < last; ++i) {
    const std::size_t before = t_dst.size();
    Written(t_segs[i], t_segs[i].addr, t_segs[i].len, &t_dst);
    for (std::size_t k = before; k < t_dst.size(); ++k) written += t_dst[k].end - t_dst[k].begin;
    if (written > budget) return false;
  }
  return true;
}

void DenseMove(std::uintptr_t dst, std::uintptr_t src, std::size_t n, Skip skip) {
  Outside(0, n, skip.begin, skip.end, [&](std::uintptr_t a, std::uintptr_t b) {
    std::memmove(reinterpret_cast<void*>(dst + a), reinterpret_cast<const void*>(src + a), b - a);
  });
}

}  // namespace

Backing BackingOf(std::uintptr_t addr, std::size_t n) {
  Backing b;
  const auto r = TheDriver()->registry.Find(addr);
  if (!r || n > r->size || addr - r->base > r->size - n) return b;
  if (r->kind == RangeKind::kDevice || (r->kind == RangeKind::kPinnedHost && !r->external)) {
    b.kind = Backing::Kind::kAnonymous;
  } else if (r->kind == RangeKind::kReservation) {
    b.kind = Backing::Kind::kReservation;
    b.reservation = r->reservation;
    b.reservation_base = r->base;
  }
  return b;
}

void SparseMove(std::uintptr_t dst, const Backing& d, std::uintptr_t src, const Backing& s,
                std::size_t n, Skip skip) {
  const bool overlap = dst < src + n && src < dst + n;
  if (n == 0) return;
  if (overlap || s.kind == Backing::Kind::kForeign) return DenseMove(dst, src, n, skip);
  Segments(src, n, s, &t_segs);
  t_src.clear();
  for (const Seg& seg : t_segs) Written(seg, seg.addr, seg.len, &t_src);
  // The written source extents are copied; the gaps between them become destination holes.
  std::size_t pos = 0;
  bool holes = false;
  for (const Extent& e : t_src) {
    holes = holes || e.begin - src > pos;
    Outside(e.begin - src, e.end - src, skip.begin, skip.end, [&](std::uintptr_t a, auto b) {
      std::memcpy(reinterpret_cast<void*>(dst + a), reinterpret_cast<const void*>(src + a), b - a);
    });
    pos = e.end - src;
  }
  if (!holes && pos == n) return;
  Segments(dst, n, d, &t_segs);
  Holes(t_segs, t_src, dst - src, dst + skip.begin, dst + skip.end);
}

bool SparseDiscard(std::uintptr_t dst, const Backing& d, std::size_t n) {
  if (d.kind == Backing::Kind::kForeign) return false;
  Segments(dst, n, d, &t_segs);
  for (const Seg& seg : t_segs)
    if (seg.fd == kForeignFd) return false;  // partly unmapped: nothing to drop there
  // Adjacent segments of one kind (memfd chunks mapped side by side) are dropped together: one
  // madvise covers several mappings. A run of VMM chunks whose written pages are at most
  // 1/kSparseDivisor of it has them zeroed in place instead: dropping a page costs a hole punch
  // and a TLB shoot-down to every core running the process, zeroing it a 4 KiB memset, and the
  // shim discards a chunk when it hands it to its next owner, who usually writes the same pages
  // again. Not anonymous memory (plain, pinned host): a swap buffer discarded after its swap-in
  // may stay idle long, and its zeroed pages would hold host RAM meanwhile (docs/simgpu.md,
  // "simgpu control entry points").
  for (std::size_t i = 0; i < t_segs.size();) {
    const std::size_t first = i;
    Seg run = t_segs[i];
    const bool memfd = run.fd >= 0;
    for (++i;
         i < t_segs.size() && (t_segs[i].fd >= 0) == memfd && t_segs[i].addr == run.addr + run.len;
         ++i)
      run.len += t_segs[i].len;
    if (memfd && SparseExtents(first, i, run.len / kSparseDivisor)) {
      for (const Extent& e : t_dst)
        std::memset(reinterpret_cast<void*>(e.begin), 0, e.end - e.begin);
    } else {
      Clear(run, run.addr, run.addr + run.len);
    }
  }
  return true;
}

bool SparseZero(std::uintptr_t dst, const Backing& d, std::size_t n) {
  if (d.kind == Backing::Kind::kForeign) return false;
  Segments(dst, n, d, &t_segs);
  for (const Seg& seg : t_segs)
    if (seg.fd == kForeignFd) return false;  // partly unmapped: let the memset fault
  Hole(t_segs, dst, dst + n, 0, 0);
  return true;
}

}  // namespace chameleon::simgpu
