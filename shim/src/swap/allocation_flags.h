// The bits of one allocation's flags word (AllocationState::flags): the one definition, shared by
// the shim's op path, which reads them on every launch, and the swap engine, which mirrors
// residency into them. Lives beside the engine, the lowest layer that writes them.
#pragma once

#include <cstdint>

namespace chameleon::shim {

/// Bits of AllocationState::flags. Written with atomic fetch_or / fetch_and; the launch hot path
/// tests them with one acquire load and no lock.
enum AllocationFlag : std::uint32_t {
  /// IPC-exported / shareable handle, or passed through: must never move (written by the shim).
  kNeverSwap = 1u << 0,
  /// Contents on the host: the next op naming it faults it in (mirrored by the swap engine).
  kSwappedOut = 1u << 8,
  /// Swap-in issued, not known complete: the op's stream waits (mirrored by the swap engine).
  kSwapInFlight = 1u << 9,
  /// A virtualised program mapping (program_vmm.h): the op path hands such ops to
  /// ProgramVmmBeforeOp (written by the shim).
  kProgramVmmPage = 1u << 10,
};

}  // namespace chameleon::shim
