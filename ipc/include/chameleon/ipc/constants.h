// Constants shared by every process that speaks the Chameleon protocol.
// The shim and the daemon may be built separately (even by different compilers), so nothing
// here may depend on compiler flags: sizes are fixed numbers, never
// std::hardware_destructive_interference_size (which changes with -mtune).
#pragma once

#include <cstddef>
#include <cstdint>

namespace chameleon::ipc {

/// One slot per independently written counter so two writers never share a cache line
/// (128 bytes covers adjacent-line prefetching on x86 and the 128-byte lines of some ARM cores).
inline constexpr std::size_t kFalseSharing = 128;

/// Shared-memory layout version. A reader refuses another major; a newer minor only appends.
inline constexpr std::uint16_t kLayoutMajor = 1;
/// 1.1: slot 7 executor detail; 1.2: RecordType::kPointerTargets; 1.3: node-placement fields of
/// slot 6 (reclaim_request_bytes, peer_held_bytes, leases_applied_generation); 1.4: slot 6's
/// own_limit_bytes; 1.5: slot 6's executor_device; 1.6: slot 7's device_peak_bytes; 1.7: the
/// IterationMark's executor_wait_ns (RecordFlag kFlagExecutorWait); 1.8: RecordType::kOpTimes.
inline constexpr std::uint16_t kLayoutMinor = 8;

/// Socket protocol version (independent of the segment layout).
inline constexpr std::uint16_t kProtocolMajor = 1;
inline constexpr std::uint16_t kProtocolMinor = 0;

/// Packs a major.minor pair the way the header's version field stores it; 0 means "not ready".
constexpr std::uint32_t PackVersion(std::uint16_t major, std::uint16_t minor) {
  return (static_cast<std::uint32_t>(major) << 16) | minor;
}
constexpr std::uint16_t VersionMajor(std::uint32_t packed) { return packed >> 16; }
constexpr std::uint16_t VersionMinor(std::uint32_t packed) { return packed & 0xffffu; }

/// Default daemon socket; CHAMELEON_SOCKET overrides it in the shim, --socket in the daemon.
inline constexpr const char* kDefaultSocketPath = "/run/chameleon/chameleond.sock";

}  // namespace chameleon::ipc
