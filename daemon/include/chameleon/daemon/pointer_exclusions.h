// PointerExclusions: the allocations one client's pointer-table scan reported
// (RecordType::kPointerTargets) and the tensors its candidate policies must therefore never swap.
//
// The shim pins a target only while that allocation lives. A tensor the program allocates afresh
// every iteration gets a new allocation id each time, so targets are also named the way policies
// name tensors: by the match key of the profile tensor the reported allocation was
// (policy/matcher.h). A later profile's tensors with an excluded key are the same role and are
// marked unswappable too, whatever their allocation ids. Both sets are bounded (kMaxExclusions).
// Not thread-safe: only the loop thread touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chameleon/daemon/client_identity.h"
#include "chameleon/daemon/profile_builder.h"
#include "chameleon/policy/profile.h"

namespace chameleon::daemon {

class PointerExclusions {
 public:
  /// Target ids and excluded keys kept (a pathological client cannot grow them further; the
  /// oldest ids are forgotten first, keys are kept once learnt).
  static constexpr std::size_t kMaxExclusions = 4096;

  explicit PointerExclusions(const ClientIdentity& who) : who_(who) {}

  /// One scan's report: new ids are remembered, the live allocations among them marked
  /// unswappable in `live` (so a later detailed iteration records them so), and their keys
  /// learnt from `profile`, the current one (a shift may replace it before the next candidate).
  void Report(std::uint64_t scan, std::span<const std::uint64_t> ids,
              std::unordered_map<std::uint64_t, LiveAllocation>* live,
              const std::shared_ptr<const policy::Profile>& profile);
  /// `profile` with every tensor that is (or plays the role of) a reported target marked
  /// unswappable: what candidates are generated from. Cached until the profile or the
  /// exclusions change; `profile` itself when there is nothing to exclude.
  std::shared_ptr<const policy::Profile> ProfileFor(
      const std::shared_ptr<const policy::Profile>& profile);

  std::size_t target_ids() const { return target_ids_.size(); }
  /// Grows whenever a report adds targets: a candidate planned under an older version may swap
  /// a tensor the shim now pins (CandidateTrials::Candidate::exclusions).
  std::uint64_t version() const { return version_; }
  std::size_t excluded_keys() const { return excluded_keys_.size(); }
  /// What chameleonctl shows (reports, target_ids, excluded_keys, excluded_tensors).
  nlohmann::json Json() const;

 private:
  const ClientIdentity& who_;
  std::unordered_set<std::uint64_t> target_ids_;
  std::vector<std::uint64_t> target_id_order_;  // insertion order, to forget the oldest
  std::unordered_set<std::uint64_t> excluded_keys_;
  std::uint64_t reports_ = 0;                             // PointerTargets records received
  std::uint64_t version_ = 0;                             // bumped when ids or keys change
  std::shared_ptr<const policy::Profile> cached_;         // the last ProfileFor() result
  std::shared_ptr<const policy::Profile> cached_source_;  // the profile it was made of
  std::uint64_t cached_version_ = 0;
  std::uint64_t excluded_tensors_ = 0;  // tensors of the last generation profile marked
};

}  // namespace chameleon::daemon
