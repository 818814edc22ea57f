#include "chameleon/daemon/candidate_trials.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

namespace chameleon::daemon {
namespace {

// Find() compares entries bytewise.
static_assert(std::has_unique_object_representations_v<ipc::SwapEntry>);

/// Keeps the best interval: a policy's own cost (its stalls) recurs in every iteration it runs,
/// a one-off host stall does not.
void Sample(CandidateTrials::Candidate& c, double seconds) {
  if (c.samples++ == 0 || seconds < c.measured_s) c.measured_s = seconds;
}

nlohmann::json PolicyJson(std::uint64_t generation, const ipc::Policy& policy, double measured_s) {
  return {{"generation", generation},
          {"swaps", policy.entries.size()},
          {"predicted_iteration_s", policy.summary.predicted_iteration_s},
          {"predicted_stall_s", policy.summary.predicted_stall_s},
          {"predicted_in_wait_s", policy.summary.predicted_in_wait_s},
          {"predicted_peak_bytes", policy.summary.predicted_peak_bytes},
          {"measured_iteration_s", measured_s}};
}

}  // namespace

void CandidateTrials::Restart() {
  candidates_.clear();
  ready_.reset();
  next_ = 0;
  duplicates_ = 0;
  step_pending_ = true;
  ++round_;
}

CandidateTrials::Progress CandidateTrials::Suspend() const {
  Progress out;
  out.next = next_;
  // Taken and not yet published: being generated, or generated and waiting.
  if (in_flight_ || ready_) out.next = std::min(out.next, taken_config_);
  out.candidates = candidates_;
  out.duplicates = duplicates_;
  out.error = error_;
  return out;
}

bool CandidateTrials::Progress::Credit(std::uint64_t generation, std::uint64_t interval,
                                       double seconds) {
  if (interval >= credit_before) return false;
  for (Candidate& c : candidates) {
    if (c.generation == generation) {
      Sample(c, seconds);
      return true;
    }
  }
  return false;
}

void CandidateTrials::Resume(Progress progress) {
  // Never measured on its own sequence's iterations: planned again.
  candidates_.clear();
  next_ = progress.next;
  for (Candidate& c : progress.candidates) {
    if (c.samples > 0) {
      candidates_.push_back(std::move(c));
    } else {
      next_ = std::min(next_, c.config);
    }
  }
  duplicates_ = progress.duplicates;
  error_ = std::move(progress.error);
  ready_.reset();
  chosen_.reset();
  chosen_generation_ = 0;
  step_pending_ = true;
  ++round_;
}

bool CandidateTrials::WantsNext(Marks marks) const {
  if (in_flight_ || ready_ || next_ >= configs_.size()) return false;
  switch (marks) {
    case Marks::kInstalled:
      // Planned while the last one is on trial: generation takes part of an iteration, and the
      // shim must have the next one before the boundary that ends the last one's trial.
      return true;
    case Marks::kGeneration:
      return step_pending_ && (candidates_.empty() || candidates_.back().samples > 0);
    case Marks::kNone:
      break;
  }
  return step_pending_;
}

bool CandidateTrials::MayPublish(Marks marks) const {
  if (marks != Marks::kInstalled || candidates_.empty()) return true;
  // Published before the shim installed the last one, it would replace it unmeasured.
  return candidates_.back().installed || candidates_.back().samples > 0;
}

bool CandidateTrials::Installed(std::uint64_t generation) {
  if (candidates_.empty() || candidates_.back().generation != generation ||
      candidates_.back().installed) {
    return false;
  }
  candidates_.back().installed = true;
  return true;
}

std::optional<ipc::Policy> CandidateTrials::TakeReady() {
  std::optional<ipc::Policy> out = std::move(ready_);
  ready_.reset();
  return out;
}

policy::GeneratorOptions CandidateTrials::Take(std::uint32_t* index, std::uint64_t exclusions) {
  in_flight_ = true;
  taken_exclusions_ = exclusions;
  step_pending_ = false;
  *index = next_++;
  taken_config_ = *index;
  return configs_[*index];
}

void CandidateTrials::Finished(std::string error) {
  in_flight_ = false;
  error_ = std::move(error);
}

void CandidateTrials::Add(std::uint64_t generation, ipc::Policy policy) {
  candidates_.push_back(
      Candidate{generation, std::move(policy), 0, 0, false, taken_exclusions_, taken_config_});
}

const CandidateTrials::Candidate* CandidateTrials::Find(const ipc::Policy& policy) const {
  for (const Candidate& c : candidates_) {
    const auto& a = c.policy.entries;
    const auto& b = policy.entries;
    // SwapEntry has no padding (56 bytes of fixed-width fields, ipc/policy_blob.h): bytewise
    // equality is field equality.
    if (a.size() == b.size() && c.policy.excluded == policy.excluded &&
        (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(a[0])) == 0)) {
      return &c;
    }
  }
  return nullptr;
}

void CandidateTrials::AddDuplicate(std::uint64_t same) {
  for (Candidate& c : candidates_) {
    if (c.generation == same) c.exclusions = std::max(c.exclusions, taken_exclusions_);
  }
  ++duplicates_;
  step_pending_ = true;  // nothing new to measure: the next configuration may go now
}

bool CandidateTrials::Credit(std::uint64_t generation, double seconds, bool measuring) {
  bool first_of_last = false;
  for (Candidate& c : candidates_) {
    if (c.generation != generation || !measuring) continue;
    Sample(c, seconds);
    if (c.samples == 1 && &c == &candidates_.back()) {
      step_pending_ = true;  // measured: the next one need not wait for another step
      first_of_last = true;
    }
  }
  if (chosen_ && chosen_generation_ != 0 && generation == chosen_generation_) {
    Sample(*chosen_, seconds);
  }
  return first_of_last;
}

void CandidateTrials::CreditApplied(std::uint64_t applied, double seconds) {
  for (Candidate& c : candidates_) {
    if (c.generation == applied) Sample(c, seconds);
  }
}

bool CandidateTrials::Pending(bool device_limited) const {
  if (in_flight_ || ready_) return true;
  // The configurations vary C and the margin, not feasibility: nothing to measure.
  if (candidates_.empty() && !error_.empty()) return false;
  if (next_ < configs_.size()) return device_limited;
  return !candidates_.empty() && candidates_.back().samples == 0;
}

const CandidateTrials::Candidate* CandidateTrials::Best(std::uint64_t exclusions) const {
  // A stale candidate may count on swapping a tensor the shim has pinned since: its measured
  // time is of a plan that runs short of memory (the safety net evicts in its place). It
  // competes only when every candidate is stale.
  const bool any_current = Stale(exclusions) < candidates_.size();
  const Candidate* best = nullptr;
  for (const Candidate& c : candidates_) {
    if (any_current && c.exclusions != exclusions) continue;
    if (best == nullptr ||
        (c.samples > 0 && (best->samples == 0 || c.measured_s < best->measured_s)))
      best = &c;
  }
  return best;
}

std::size_t CandidateTrials::Stale(std::uint64_t exclusions) const {
  return static_cast<std::size_t>(
      std::count_if(candidates_.begin(), candidates_.end(),
                    [&](const Candidate& c) { return c.exclusions != exclusions; }));
}

void CandidateTrials::Choose(const Candidate* best, std::uint64_t generation) {
  chosen_.reset();
  if (best != nullptr) chosen_ = *best;
  chosen_generation_ = generation;
}

policy::GeneratorOptions CandidateTrials::config(std::uint32_t index) const {
  if (configs_.empty()) return {};
  return configs_[std::min<std::size_t>(index, configs_.size() - 1)];
}

void CandidateTrials::Rechoose(std::uint64_t generation, ipc::Policy policy) {
  if (!chosen_) return;
  chosen_->generation = generation;
  chosen_->policy = std::move(policy);
  chosen_->measured_s = 0;
  chosen_->samples = 0;
  chosen_->installed = false;
  chosen_generation_ = generation;
}

std::uint64_t CandidateTrials::progress() const {
  return next_ + candidates_.size() + duplicates_ + (ready_ ? 1 : 0) +
         (!candidates_.empty() && candidates_.back().installed ? 1 : 0) +
         (!candidates_.empty() && candidates_.back().samples > 0 ? 1 : 0);
}

void CandidateTrials::Describe(std::uint64_t applied, double iteration_s,
                               nlohmann::json* out) const {
  nlohmann::json candidates = nlohmann::json::array();
  for (const Candidate& c : candidates_) {
    candidates.push_back(PolicyJson(c.generation, c.policy, c.measured_s));
    candidates.back()["exclusions_version"] = c.exclusions;  // PointerExclusions::version()
  }
  // In force: a GEN_POLICY candidate, or the chosen one republished in STABLE under its own
  // generation. Measured = the last iteration's device time.
  const ipc::Policy* policy = nullptr;
  for (const Candidate& c : candidates_) {
    if (c.generation == applied) policy = &c.policy;
  }
  if (policy == nullptr && chosen_ && chosen_generation_ != 0 && applied == chosen_generation_) {
    policy = &chosen_->policy;
  }
  nlohmann::json in_force{{"generation", applied}, {"measured_iteration_s", iteration_s}};
  in_force["predicted_iteration_s"] =
      policy != nullptr ? nlohmann::json(policy->summary.predicted_iteration_s) : nullptr;
  in_force["swaps"] = policy != nullptr ? nlohmann::json(policy->entries.size()) : nullptr;
  nlohmann::json& j = *out;
  j["candidates"] = candidates;
  j["chosen"] = chosen_ ? PolicyJson(chosen_->generation, chosen_->policy, chosen_->measured_s)
                        : nlohmann::json(nullptr);
  j["in_force"] = in_force;
  j["error"] = error_;
  j["duplicates"] = duplicates_;
}

void CandidateTrials::Republished(std::uint64_t from, std::uint64_t to) {
  for (Candidate& c : candidates_) {
    if (c.generation == from) c.generation = to;
  }
  if (chosen_generation_ == from) chosen_generation_ = to;
}

}  // namespace chameleon::daemon
