// ClientSession: measuring GEN_POLICY's candidates and choosing among them (docs/detection.md
// §4). Generating and publishing them is in session_policy.cc.
//
// Every candidate configuration is measured before STABLE: the next candidate is generated as
// soon as the previous one has one credited interval, and while candidates are still being tried
// the stage machine holds GEN_POLICY past stage_n (bounded, so a client whose marks stop coming
// still reaches STABLE).
#include <spdlog/spdlog.h>

#include "chameleon/daemon/client_session.h"

namespace chameleon::daemon {
namespace {

/// Device-timed intervals after the detailed one whose best is the profile's iteration time: a
/// one-off host stall (first use of a resource, a synchronisation) must not become the profile's.
constexpr std::uint32_t kProfileSamples = 2;
/// GEN_POLICY steps a hold may add per candidate configuration (a last-resort bound; a stalled
/// hold lets go earlier). Publishing, the shim's 10 ms mailbox poll, one whole interval under
/// the candidate and the mark that reports its device time (the host runs ahead of the device)
/// take about three iterations of a slow loop, up to six of one faster than the shim's tick; the
/// profile before them takes three more.
constexpr int kHoldStepsPerCandidate = 8;
/// A hold without progress for this many iterations *and* this long lets go. Both: a fast loop
/// runs many iterations during the shim's mailbox poll, a slow one few in a second.
constexpr std::uint64_t kHoldStallIterations = 4;
constexpr std::uint64_t kHoldStallNs = 1'000'000'000;

}  // namespace

void ClientSession::OnTimedInterval(std::uint64_t interval, double seconds) {
  // Credited only to a generation in force at both ends: a candidate installed at boundary k is
  // judged by intervals k, k + 1, ..., never by one that began under its predecessor.
  const MarkGeneration& begin = mark_generations_[interval % kMarkGenerations];
  const MarkGeneration& end = mark_generations_[(interval + 1) % kMarkGenerations];
  if (begin.boundary != interval || end.boundary != interval + 1 ||
      begin.generation != end.generation) {
    return;
  }
  const std::uint64_t generation = begin.generation;
  if (profile_fresh_ && !profile_timed_ && candidates_.empty() && interval > detail_boundary_ &&
      generation >= profile_generation_) {
    if (profile_samples_++ == 0 || seconds < profile_best_s_) profile_best_s_ = seconds;
    if (profile_samples_ >= kProfileSamples) TimeProfile(profile_best_s_, "device");
  }
  // The best interval: a policy's own cost (its stalls) recurs in every iteration it runs, a
  // one-off host stall does not.
  auto credit = [seconds](Candidate& c) {
    if (c.samples++ == 0 || seconds < c.measured_s) c.measured_s = seconds;
  };
  // Frozen once STABLE chose among them (the last one may stay in force a little longer).
  for (Candidate& c : candidates_) {
    if (c.generation != generation || stage() != Stage::kGenPolicy) continue;
    credit(c);
    if (c.samples == 1 && &c == &candidates_.back()) {
      // Measured: the next candidate need not wait for another GEN_POLICY step.
      candidate_step_pending_ = true;
      spdlog::debug("client {}: candidate generation {} measured {:.6f} s (interval {})",
                    identity_.id, generation, seconds, interval);
    }
  }
  if (chosen_ && chosen_generation_ != 0 && generation == chosen_generation_) credit(*chosen_);
}

void ClientSession::CreditLegacy(double seconds) {
  // A layout-1.0 shim's marks name neither the interval nor the generation: credit the
  // generation the shim says is applied now, and time the profile with the first device time.
  if (profile_fresh_ && !profile_timed_ && candidates_.empty()) TimeProfile(seconds, "device");
  const std::uint64_t applied =
      segment_.header()->policy_generation_applied.load(std::memory_order_acquire);
  for (Candidate& c : candidates_) {
    if (c.generation != applied) continue;
    if (c.samples++ == 0 || seconds < c.measured_s) c.measured_s = seconds;
  }
}

bool ClientSession::ReadyForCandidate() const {
  if (!profile_timed_) return false;
  // One candidate at a time: the next only once the last one has a measurement of its own
  // (with a 1.0 shim nothing says which iteration ran under which policy: one per step).
  if (candidates_.empty() || !marks_carry_generation_) return true;
  return candidates_.back().samples > 0;
}

bool ClientSession::CandidatesPending() const {
  // Only with layout-1.1 marks (each candidate measured on its own intervals): a client without
  // them keeps the paper's n.
  if (stage() != Stage::kGenPolicy || !marks_carry_generation_ || disabled_) return false;
  // The profile the candidates need is on its way (a late boundary detection can leave fewer
  // than n steps for it): the detailed iteration, then its device time.
  if (detail_ == DetailState::kRequested || detail_ == DetailState::kCollecting) return true;
  if (!profile_fresh_) return false;  // the detailed iteration was given up
  if (!profile_timed_ || generation_in_flight_) return true;
  // The generator cannot plan this profile at all (the configurations vary C and the margin,
  // not feasibility): nothing to measure.
  if (candidates_.empty() && !generation_error_.empty()) return false;
  if (next_candidate_ < configs_.size()) return DeviceLimit() != 0;
  return !candidates_.empty() && candidates_.back().samples == 0;
}

void ClientSession::UpdateStageHold(std::uint64_t now_ns) {
  // A hold that sees no progress for a while (marks stopped coming, the shim never applies the
  // candidate) lets go: the client still reaches STABLE, with what was measured.
  if (stage() != Stage::kGenPolicy && !stage_hold_) return;  // per op: keep the others cheap
  // O(1): the profile, then candidates taken, published and measured one after the other.
  const std::uint64_t progress = 4 * detail_attempts_ + static_cast<std::uint64_t>(detail_) +
                                 (profile_timed_ ? 1 : 0) + next_candidate_ + candidates_.size() +
                                 (!candidates_.empty() && candidates_.back().samples > 0 ? 1 : 0);
  if (progress != hold_progress_ || hold_progress_ns_ == 0) {
    hold_progress_ = progress;
    hold_progress_iteration_ = iterations();
    hold_progress_ns_ = now_ns;
  }
  const bool stalled = iterations() - hold_progress_iteration_ > kHoldStallIterations &&
                       now_ns - hold_progress_ns_ > kHoldStallNs;
  stage_hold_ = CandidatesPending() && !stalled;
  tracker_->SetGenPolicyHold(stage_hold_,
                             kHoldStepsPerCandidate * static_cast<int>(configs_.size()));
}

const ClientSession::Candidate* ClientSession::BestCandidate() const {
  // The best measured device time; with no measurement at all, the first candidate.
  const Candidate* best = candidates_.empty() ? nullptr : &candidates_.front();
  for (const Candidate& c : candidates_) {
    if (c.samples > 0 && (best->samples == 0 || c.measured_s < best->measured_s)) best = &c;
  }
  return best;
}

}  // namespace chameleon::daemon
