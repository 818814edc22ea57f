// ClientSession: allocations the shim's pointer-table scan reported (RecordType::kPointerTargets)
// and the tensors GEN_POLICY's candidates must therefore never swap.
//
// The shim pins a target only while that allocation lives. A tensor the program allocates afresh
// every iteration gets a new allocation id each time, so the daemon names targets the way
// policies name tensors: by the match key of the profile tensor the reported allocation was
// (policy/matcher.h). A later profile's tensors with an excluded key are the same role and are
// marked unswappable too, whatever their allocation ids.
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "chameleon/daemon/client_session.h"
#include "chameleon/policy/matcher.h"

namespace chameleon::daemon {
namespace {

/// Target ids and excluded keys kept per client (a pathological client cannot grow them further;
/// the oldest ids are forgotten first, keys are kept once learnt).
constexpr std::size_t kMaxExclusions = 4096;

}  // namespace

void ClientSession::HandlePointerTargets(std::uint64_t scan, std::span<const std::uint64_t> ids) {
  ++pointer_reports_;
  std::size_t fresh = 0;
  for (std::uint64_t id : ids) {
    if (id == ipc::kNoAllocation || !target_ids_.insert(id).second) continue;
    ++fresh;
    target_id_order_.push_back(id);
    if (target_id_order_.size() > kMaxExclusions) {
      target_ids_.erase(target_id_order_.front());
      target_id_order_.erase(target_id_order_.begin());
    }
    // A live allocation that a later detailed iteration sees whole is recorded unswappable.
    if (auto it = live_.find(id); it != live_.end()) it->second.swappable = false;
  }
  if (fresh == 0) return;
  ++exclusions_version_;
  spdlog::info("client {} (pid {}): pointer-table scan {} reported {} new target allocation(s)",
               identity_.id, identity_.pid, scan, fresh);
  // Learn the keys now, while the profile these allocations belong to is the current one (a
  // shift may replace it before the next candidate is generated).
  ProfileForGeneration();
}

std::shared_ptr<const policy::Profile> ClientSession::ProfileForGeneration() {
  if (!profile_ || (target_ids_.empty() && excluded_keys_.empty())) return profile_;
  if (generation_profile_ && generation_profile_source_ == profile_ &&
      generation_profile_version_ == exclusions_version_) {
    return generation_profile_;
  }
  const std::vector<policy::TensorFeatures> features = policy::ComputeFeatures(*profile_);
  // Reported allocations that are tensors of this profile teach their keys ...
  for (std::size_t i = 0; i < profile_->tensors.size(); ++i) {
    if (target_ids_.count(profile_->tensors[i].external_id) != 0 &&
        excluded_keys_.size() < kMaxExclusions) {
      excluded_keys_.insert(features[i].match_key);
    }
  }
  // ... and every tensor with an excluded key (this iteration's or an earlier one's) is kept.
  auto profile = std::make_shared<policy::Profile>(*profile_);
  std::uint64_t marked = 0;
  for (std::size_t i = 0; i < profile->tensors.size(); ++i) {
    policy::ProfileTensor& t = profile->tensors[i];
    if (t.swappable && (excluded_keys_.count(features[i].match_key) != 0 ||
                        target_ids_.count(t.external_id) != 0)) {
      t.swappable = false;
      ++marked;
    }
  }
  if (marked != excluded_tensors_) {
    spdlog::info("client {} (pid {}): {} tensor(s) excluded from candidates as pointer targets",
                 identity_.id, identity_.pid, marked);
  }
  excluded_tensors_ = marked;
  generation_profile_ = std::move(profile);
  generation_profile_source_ = profile_;
  generation_profile_version_ = exclusions_version_;
  return generation_profile_;
}

nlohmann::json ClientSession::ExclusionsJson() const {
  return {{"reports", pointer_reports_},
          {"target_ids", target_ids_.size()},
          {"excluded_keys", excluded_keys_.size()},
          {"excluded_tensors", excluded_tensors_}};
}

}  // namespace chameleon::daemon
