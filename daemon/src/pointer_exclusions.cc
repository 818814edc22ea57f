#include "chameleon/daemon/pointer_exclusions.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "chameleon/ipc/event_records.h"
#include "chameleon/policy/matcher.h"

namespace chameleon::daemon {

void PointerExclusions::Report(std::uint64_t scan, std::span<const std::uint64_t> ids,
                               std::unordered_map<std::uint64_t, LiveAllocation>* live,
                               const std::shared_ptr<const policy::Profile>& profile) {
  ++reports_;
  std::size_t fresh = 0;
  for (std::uint64_t id : ids) {
    if (id == ipc::kNoAllocation || !target_ids_.insert(id).second) continue;
    ++fresh;
    target_id_order_.push_back(id);
    if (target_id_order_.size() > kMaxExclusions) {
      target_ids_.erase(target_id_order_.front());
      target_id_order_.erase(target_id_order_.begin());
    }
    if (auto it = live->find(id); it != live->end() && it->second.swappable) {
      // The executor still holds it in whole chunks; it only stops being a candidate.
      it->second.swappable = false;
      it->second.pinned = true;
    }
  }
  if (fresh == 0) return;
  ++version_;
  spdlog::info("client {} (pid {}): pointer-table scan {} reported {} new target allocation(s)",
               who_.id, who_.pid, scan, fresh);
  ProfileFor(profile);  // learns the keys now
}

std::shared_ptr<const policy::Profile> PointerExclusions::ProfileFor(
    const std::shared_ptr<const policy::Profile>& profile) {
  if (!profile || (target_ids_.empty() && excluded_keys_.empty())) return profile;
  if (cached_ && cached_source_ == profile && cached_version_ == version_) return cached_;
  const std::vector<policy::TensorFeatures> features = policy::ComputeFeatures(*profile);
  // Reported allocations that are tensors of this profile teach their keys ...
  for (std::size_t i = 0; i < profile->tensors.size(); ++i) {
    if (target_ids_.count(profile->tensors[i].external_id) != 0 &&
        excluded_keys_.size() < kMaxExclusions) {
      excluded_keys_.insert(features[i].match_key);
    }
  }
  // ... and every tensor with an excluded key (this iteration's or an earlier one's) is kept.
  auto marked_profile = std::make_shared<policy::Profile>(*profile);
  std::uint64_t marked = 0;
  for (std::size_t i = 0; i < marked_profile->tensors.size(); ++i) {
    policy::ProfileTensor& t = marked_profile->tensors[i];
    if (t.swappable && (excluded_keys_.count(features[i].match_key) != 0 ||
                        target_ids_.count(t.external_id) != 0)) {
      t.swappable = false;
      t.pinned = true;  // held in whole chunks all the same: the plan must count them so
      ++marked;
    }
  }
  if (marked != excluded_tensors_) {
    spdlog::info("client {} (pid {}): {} tensor(s) excluded from candidates as pointer targets",
                 who_.id, who_.pid, marked);
  }
  excluded_tensors_ = marked;
  cached_ = std::move(marked_profile);
  cached_source_ = profile;
  cached_version_ = version_;
  return cached_;
}

nlohmann::json PointerExclusions::Json() const {
  return {{"reports", reports_},
          {"target_ids", target_ids_.size()},
          {"excluded_keys", excluded_keys_.size()},
          {"excluded_tensors", excluded_tensors_}};
}

}  // namespace chameleon::daemon
