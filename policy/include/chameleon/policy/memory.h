// Memory replay without swapping and the Memory Reduction List (MRL).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// Checks indices, orderings and sizes. Returns an empty string when `profile` is usable,
/// otherwise a message naming the first problem. Untrusted input (files, shared memory) goes
/// through this before anything else.
std::string ValidateProfile(const Profile& profile);

/// Device bytes in use during each op, without swapping:
///   mem[i] = Σ bytes of tensors with alloc_op ≤ i ≤ free_op (-1 = open end)
///          + untracked[i],
/// where untracked[i] = max(0, bytes_live_after[i] - tracked bytes live after op i) is memory the
/// profile saw but no tensor explains (workspaces, allocator slack); it is never swappable.
/// O(ops + tensors). `profile` must be valid.
std::vector<std::uint64_t> ReplayMemory(const Profile& profile);

/// Device bytes `tensor` occupies in the shim's executor: a swappable tensor of at least
/// `min_bytes` (the executor serves those through VMM chunks; smaller ones pass through) is
/// rounded up to a multiple of `chunk_bytes` (GeneratorOptions::chunk_bytes; 0 = no rounding).
/// Saturates instead of overflowing.
std::uint64_t DeviceBytes(const ProfileTensor& tensor, std::uint64_t chunk_bytes,
                          std::uint64_t min_bytes = 0);

/// ReplayMemory with every tensor counted at DeviceBytes(tensor, chunk_bytes, min_bytes).
/// Untracked bytes are still measured against the tensors' own bytes (bytes_live_after counts
/// requested sizes).
std::vector<std::uint64_t> ReplayMemory(const Profile& profile, std::uint64_t chunk_bytes,
                                        std::uint64_t min_bytes = 0);

/// One entry of the MRL: at `op`, `bytes` must be freed.
struct MemoryReductionEntry {
  std::uint32_t op = 0;
  std::uint64_t bytes = 0;
};

/// Every op where `mem` exceeds `limit`, in op order.
std::vector<MemoryReductionEntry> MemoryReductionList(const std::vector<std::uint64_t>& mem,
                                                      std::uint64_t limit);

}  // namespace chameleon::policy
