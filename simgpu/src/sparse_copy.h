// Copies and zero-fills of simulated memory that cost host RAM only for written bytes: a copy
// moves the written extents of its source (written_extents.h) and turns the rest of its
// destination back into holes, which read as zeros, instead of copying zeros page by page.
// docs/simgpu.md, "Memory model", gives the rules and the wall-time cost.
#pragma once

#include <cstddef>
#include <cstdint>

namespace chameleon::simgpu {

struct Reservation;

/// What backs one endpoint of a copy or memset, captured when the operation is submitted (a
/// cuMemFreeAsync queued after the copy unregisters its range before the copy runs).
struct Backing {
  enum class Kind : std::uint8_t {
    kForeign,      ///< memory simgpu does not own (pageable, cuMemHostRegister): copied densely
    kAnonymous,    ///< cuMemAlloc*, pool allocations, cuMemHostAlloc: private anonymous mmap
    kReservation,  ///< inside a cuMemAddressReserve range: memfd chunks, resolved when run
  };
  Kind kind = Kind::kForeign;
  Reservation* reservation = nullptr;  ///< kReservation
  std::uintptr_t reservation_base = 0;
};

/// Classifies [addr, addr + n) by the address registry; kForeign unless the whole range lies in
/// one simgpu range. Thread-safe.
Backing BackingOf(std::uintptr_t addr, std::size_t n);

/// Bytes [begin, end) of an operation, relative to its start, that it must leave untouched (the
/// test-only fault hook, fault_hook.h). Empty when begin == end.
struct Skip {
  std::size_t begin = 0;
  std::size_t end = 0;
};

/// memmove(dst, src, n), except that only the source's written extents are read and the
/// destination bytes opposite never-written source bytes become holes where the destination is
/// simgpu's (elsewhere they are written as zeros). Overlapping ranges and foreign sources are
/// copied densely. Runs on a stream worker; thread-safe, no allocation after the first calls.
void SparseMove(std::uintptr_t dst, const Backing& d, std::uintptr_t src, const Backing& s,
                std::size_t n, Skip skip = {});

/// Forgets [dst, dst + n): its whole pages dropped with one madvise per backing segment, without
/// reading which are written (cheaper than SparseZero when most are not), partial edge pages
/// written with zeros. False, with nothing done, for foreign or partly unmapped memory.
bool SparseDiscard(std::uintptr_t dst, const Backing& d, std::size_t n);

/// Zeroes [dst, dst + n) by dropping its written pages (partial pages are written as zeros).
/// False, with nothing done, for foreign memory: the caller then writes the zeros itself.
bool SparseZero(std::uintptr_t dst, const Backing& d, std::size_t n);

}  // namespace chameleon::simgpu
