// Assembles the records of one detailed iteration into a policy::Profile
// (docs/profile-format.md): ops in issue order with their tensors, allocation and free points,
// device bytes in use after each op (MemInfo records) and the measured iteration time.
//
// A launch record lists the tracked allocations its arguments point into without saying which
// are read and which are written, so they are all recorded as reads; copies and memsets record
// their destination as written. The generator only needs the uses, not their direction.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>

#include "chameleon/policy/profile.h"

namespace chameleon::daemon {

/// A device allocation the client reported live (kept across iterations by the session).
struct LiveAllocation {
  std::uint64_t bytes = 0;
  bool swappable = true;
  std::uint16_t device = 0;  ///< the client's device ordinal (AllocRecord::device)
  bool pinned = false;       ///< a pointer-table target the executor serves (ProfileTensor::pinned)
};

/// Not thread-safe.
class ProfileBuilder {
 public:
  /// Starts a new profile; `live` describes allocations made before the iteration.
  void Begin(const std::unordered_map<std::uint64_t, LiveAllocation>* live);
  void AddOp(std::uint32_t token, std::span<const std::uint64_t> reads, std::uint64_t written);
  void AddAlloc(std::uint64_t id, std::uint64_t bytes, bool swappable, std::uint16_t device = 0);
  void AddFree(std::uint64_t id);
  void AddMemInfo(std::uint64_t bytes_live);
  /// The measured device time of op `op` (its index among the ops added so far); an index past
  /// them (an untrusted record) is ignored.
  void SetOpTime(std::uint32_t op, double seconds);
  std::size_t ops() const { return profile_.ops.size(); }
  /// Completes the profile: names ops from `names` and stamps the iteration time.
  policy::Profile Finish(const std::unordered_map<std::uint32_t, std::string>& names,
                         double iteration_s, std::string source);

 private:
  std::uint32_t TensorIndex(std::uint64_t id);
  void Use(std::uint32_t tensor, std::uint32_t op);

  policy::Profile profile_;
  std::unordered_map<std::uint64_t, std::uint32_t> index_;  // allocation id -> tensor index
  const std::unordered_map<std::uint64_t, LiveAllocation>* live_ = nullptr;
};

}  // namespace chameleon::daemon
