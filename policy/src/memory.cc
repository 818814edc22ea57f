#include "chameleon/policy/memory.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace chameleon::policy {
namespace {

std::string TensorProblem(const ProfileTensor& t, std::size_t index, std::size_t ops) {
  const std::string where = "tensor " + std::to_string(index) + ": ";
  const auto n = static_cast<std::int64_t>(ops);
  if (t.alloc_op < -1 || t.alloc_op >= n) return where + "alloc_op out of range";
  if (t.free_op < -1 || t.free_op >= n) return where + "free_op out of range";
  if (t.alloc_op >= 0 && t.free_op >= 0 && t.free_op < t.alloc_op) {
    return where + "freed before it is allocated";
  }
  for (std::size_t k = 0; k < t.uses.size(); ++k) {
    const std::int64_t use = t.uses[k];
    if (use >= n) return where + "use out of range";
    if (k > 0 && t.uses[k - 1] >= t.uses[k]) return where + "uses not strictly ascending";
    // A use outside the tensor's lifetime would make the replay lie about residency.
    if (use < t.alloc_op || (t.free_op >= 0 && use > t.free_op)) {
      return where + "used outside its lifetime";
    }
  }
  return {};
}

}  // namespace

std::string ValidateProfile(const Profile& profile) {
  if (profile.ops.empty()) return "profile has no ops";
  if (!(profile.iteration_s > 0)) return "iteration_s must be positive";
  if (profile.ops.size() > (1u << 31) || profile.tensors.size() > (1u << 31)) {
    return "profile too large";
  }
  // Memory arithmetic is signed 64-bit: totals beyond 2^62 bytes (4 EiB) are corrupt input.
  constexpr std::uint64_t kMaxTotal = 1ull << 62;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < profile.tensors.size(); ++i) {
    std::string problem = TensorProblem(profile.tensors[i], i, profile.ops.size());
    if (!problem.empty()) return problem;
    total += std::min(profile.tensors[i].bytes, kMaxTotal);
    if (total > kMaxTotal)
      return "tensor " + std::to_string(i) + ": sizes add up beyond 2^62 bytes";
  }
  for (std::size_t i = 0; i < profile.ops.size(); ++i) {
    const ProfileOp& op = profile.ops[i];
    if (op.bytes_live_after > kMaxTotal)
      return "op " + std::to_string(i) + ": bytes_live_after too large";
    for (const auto* list : {&op.reads, &op.writes}) {
      for (std::uint32_t t : *list) {
        if (t >= profile.tensors.size()) {
          return "op " + std::to_string(i) + ": tensor index out of range";
        }
      }
    }
  }
  return {};
}

std::uint64_t DeviceBytes(const ProfileTensor& tensor, std::uint64_t chunk_bytes,
                          std::uint64_t min_bytes) {
  if (chunk_bytes == 0 || !(tensor.swappable || tensor.pinned) || tensor.bytes < min_bytes ||
      tensor.bytes % chunk_bytes == 0) {
    return tensor.bytes;
  }
  const std::uint64_t pad = chunk_bytes - tensor.bytes % chunk_bytes;
  // ValidateProfile caps sizes at 2^62, so this only guards unvalidated callers.
  return tensor.bytes > UINT64_MAX - pad ? UINT64_MAX : tensor.bytes + pad;
}

std::vector<std::uint64_t> ReplayMemory(const Profile& profile) { return ReplayMemory(profile, 0); }

std::vector<std::uint64_t> ReplayMemory(const Profile& profile, std::uint64_t chunk_bytes,
                                        std::uint64_t min_bytes) {
  const std::size_t n = profile.ops.size();
  // Difference arrays over alloc_op..free_op (both ends included, as bytes_live_after counts a
  // tensor: docs/profile-format.md): `during` in device bytes (chunk-rounded), `requested` in the
  // tensors' own sizes, to be compared with bytes_live_after, which counts requested sizes. What
  // the measurement holds beyond the tracked tensors is untracked memory (workspaces, the
  // allocator's slack). Comparing with the tensors still live *after* the op instead charged
  // every tensor freed at op i twice there: a phantom spike of the freed bytes at each free op,
  // 3.1 GB at the op that frees GPT-2 XL's gradients (the plan then swapped 6.2 GB for a
  // 2.5 GB excess).
  std::vector<std::int64_t> during(n + 1, 0);
  std::vector<std::int64_t> requested(n + 1, 0);
  for (const ProfileTensor& t : profile.tensors) {
    const auto bytes = static_cast<std::int64_t>(t.bytes);
    const auto device = static_cast<std::int64_t>(DeviceBytes(t, chunk_bytes, min_bytes));
    const std::size_t begin = t.alloc_op < 0 ? 0 : static_cast<std::size_t>(t.alloc_op);
    const std::size_t end =
        t.free_op < 0 ? n : std::min(static_cast<std::size_t>(t.free_op) + 1, n);
    during[begin] += device;
    during[end] -= device;
    requested[begin] += bytes;
    requested[end] -= bytes;
  }
  std::vector<std::uint64_t> mem(n);
  std::int64_t tracked = 0;
  std::int64_t tracked_requested = 0;
  for (std::size_t i = 0; i < n; ++i) {
    tracked += during[i];
    tracked_requested += requested[i];
    const auto seen = static_cast<std::int64_t>(profile.ops[i].bytes_live_after);
    const std::int64_t untracked = seen > tracked_requested ? seen - tracked_requested : 0;
    mem[i] = static_cast<std::uint64_t>(tracked + untracked);
  }
  return mem;
}

std::vector<MemoryReductionEntry> MemoryReductionList(const std::vector<std::uint64_t>& mem,
                                                      std::uint64_t limit) {
  std::vector<MemoryReductionEntry> mrl;
  for (std::size_t i = 0; i < mem.size(); ++i) {
    if (mem[i] > limit) mrl.push_back({static_cast<std::uint32_t>(i), mem[i] - limit});
  }
  return mrl;
}

}  // namespace chameleon::policy
