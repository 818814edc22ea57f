#include "chameleon/daemon/loop_boundary.h"

#include <fnmatch.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace chameleon::daemon {
namespace {

/// First detection attempt once this many ops arrived; later ones when the history grew by a
/// quarter (1 / kGrowthDivisor): a loop is found within about a third of an iteration of its
/// third period, which the m + n + 3 iterations to STABLE count from the first (issue 18), and
/// the attempts still cost at most kGrowthDivisor + 1 times the final history (geometric).
constexpr std::size_t kFirstDetectionOps = 64;
constexpr std::size_t kGrowthDivisor = 4;
/// Histories below this size are retried after kDetectionRetryNs even without growing by a
/// quarter.
constexpr std::size_t kRetrySmallHistoryOps = 1u << 16;
constexpr std::uint64_t kDetectionRetryNs = 250'000'000;
/// A boundary whose periodic part covers less of its history is pending. Half is the detector's
/// own floor; between half and three quarters a partly seen first step ending in a run of
/// identical layers (the backward pass of six layers after 42 forward ops, found in 84-113 ops)
/// passes for a loop after a long set-up, and only the ops that follow tell them apart.
constexpr double kFirmCoverage = 0.75;
/// Iterations a pending boundary must cut past its history to come into force: the run of layers
/// ends within one, a loop goes on. The periodic part must also have grown to kFirmCoverage of
/// everything seen: a layer run that recurs dozens of times (the replayed Megatron trace's forward
/// is 40 identical 20-op layers, first seen as a loop from op 447 of 894) recurs twice in no time,
/// but ends before it covers three quarters of the stream.
constexpr std::uint64_t kConfirmingIterations = 2;
/// A pending signature not seen for this many periods is refuted (as a lost boundary).
constexpr std::uint64_t kRejectPeriods = 4;

/// Whether a loop from op `from` on covers enough of `ops` ops to be in force.
bool Firm(std::size_t ops, std::size_t from) {
  return double(ops - std::min(ops, from)) >= kFirmCoverage * double(ops);
}

}  // namespace

LoopBoundary::LoopBoundary(const ClientIdentity& who, const DetectionOptions& options)
    : who_(who),
      options_(options),
      recent_(kRecentOps, 0),
      next_detection_ops_(kFirstDetectionOps) {}

LoopBoundary::Route LoopBoundary::Remember(std::uint32_t token) {
  if (tracker_ && !pending_) {
    recent_[recent_count_++ & (kRecentOps - 1)] = token;
    return Route::kTracker;
  }
  if (history_.size() >= options_.max_history_ops && !in_flight_) {
    // Keep the most recent half: a loop longer than the history cannot be detected anyway.
    const std::size_t erased = history_.size() / 2;
    history_.erase(history_.begin(), history_.begin() + static_cast<std::ptrdiff_t>(erased));
    periodic_from_ -= std::min(periodic_from_, erased);
    next_detection_ops_ = history_.size() + history_.size() / kGrowthDivisor;
  }
  history_.push_back(token);
  if (!pending_) return Route::kHistory;
  tracker_->Add(token);
  WeighPending(history_.size());
  if (!tracker()) return Route::kHistory;
  Confirm();
  return Route::kConfirmed;
}

void LoopBoundary::WeighPending(std::size_t ops_seen) {
  if (tracker_->ops_since_boundary() > kRejectPeriods * boundary_->period) {
    static_assert(kRejectPeriods == 4, "the reason below names it");
    Reject("did not recur within 4 periods");
  } else if (tracker_->shifts() > pending_shifts_) {
    // A loop repeats its iteration; blocks inside one iteration repeat only for a while and
    // then come back changed (a 1F1B pipeline's steady phase: forward + backward of one
    // micro-batch, 81 ops, five times; then 113 and 200 ops, its signature still there). Let
    // into force, every cut after the run was a shift and the stages planned on micro-batches.
    Reject("changed length or content at its next cut");
  } else if (tracker_->iterations() >= pending_from_iteration_ + kConfirmingIterations &&
             Firm(ops_seen, periodic_from_)) {
    pending_ = false;  // Confirm() once the ops being replayed are through
  }
}

void LoopBoundary::Confirm() {
  period_ = boundary_->period;
  found_at_iteration_ = tracker_->iterations();
  history_.clear();
  history_.shrink_to_fit();
}

void LoopBoundary::Reject(const char* why) {
  spdlog::info(
      "client {} (pid {}): the pending boundary (period {} ops) {}; detecting again over "
      "{} ops",
      who_.id, who_.pid, boundary_->period, why, history_.size());
  ++rejected_;
  pending_ = false;
  tracker_.reset();
  boundary_.reset();
  // The history the boundary was found in, and what refuted it, is all kept: the next attempt
  // sees where the run ended.
  next_detection_ops_ =
      std::max(history_.size(), last_detection_ops_ + last_detection_ops_ / kGrowthDivisor) + 1;
}

bool LoopBoundary::CheckLost() {
  if (!tracker_ || pending_ || pattern_) return false;
  const std::uint64_t ops = tracker_->iteration_ops();
  const std::uint64_t limit = ops > 0 ? 4 * ops : options_.max_history_ops;
  if (tracker_->ops_since_boundary() <= limit) return false;
  spdlog::warn(
      "client {} (pid {}): boundary signature not seen for {} ops (iteration was {} ops); "
      "detecting again",
      who_.id, who_.pid, tracker_->ops_since_boundary(), ops);
  ++losses_;
  shifts_before_ += tracker_->shifts();
  iterations_before_ += tracker_->iterations();
  tracker_.reset();
  boundary_.reset();
  // Start the new history with the recent ops, oldest first.
  const std::size_t kept =
      static_cast<std::size_t>(std::min<std::uint64_t>(recent_count_, kRecentOps));
  history_.clear();
  for (std::uint64_t i = recent_count_ - kept; i < recent_count_; ++i) {
    history_.push_back(recent_[i & (kRecentOps - 1)]);
  }
  next_detection_ops_ = kFirstDetectionOps;
  return true;
}

bool LoopBoundary::TryPattern(std::uint32_t token, const std::string& name) {
  if (pattern_) return false;
  for (const std::string& pattern : options_.boundary_patterns) {
    if (fnmatch(pattern.c_str(), name.c_str(), 0) != 0) continue;
    if (tracker_ && !pending_) {
      // The kernel appeared only after detection had settled on a period (a replayed trace's
      // once-per-step op comes after dozens of identical layers): the person who named it knows
      // the loop better than the detector.
      spdlog::info(
          "client {} (pid {}): boundary set by pattern '{}': kernel '{}' (token {}), replacing "
          "the detected period of {} ops",
          who_.id, who_.pid, pattern, name, token, period_);
      shifts_before_ += tracker_->shifts();
      iterations_before_ += tracker_->iterations();
      ++replaced_;
    } else {
      spdlog::info("client {} (pid {}): boundary set by pattern '{}': kernel '{}' (token {})",
                   who_.id, who_.pid, pattern, name, token);
    }
    pattern_ = true;
    pending_ = false;
    boundary_.reset();
    tracker_.emplace(std::vector<std::uint32_t>{token}, options_);
    found_at_iteration_ = 0;
    history_.clear();
    history_.shrink_to_fit();
    return true;
  }
  return false;
}

bool LoopBoundary::WantsDetection(std::uint64_t now_ns) const {
  if (tracker_ || pattern_ || in_flight_) return false;
  if (history_.size() >= next_detection_ops_) return true;
  // A small history that grew a little and then stopped (the client paused or ended its loop)
  // is tried again after a while: cheap, and otherwise it would wait for growth that never comes.
  return history_.size() > last_detection_ops_ && history_.size() < kRetrySmallHistoryOps &&
         now_ns - last_detection_ns_ > kDetectionRetryNs;
}

std::vector<std::uint32_t> LoopBoundary::TakeSnapshot(std::uint64_t now_ns) {
  in_flight_ = true;
  last_detection_ops_ = history_.size();
  last_detection_ns_ = now_ns;
  return history_;
}

LoopBoundary::Installed LoopBoundary::Install(
    const std::optional<Boundary>& boundary, std::optional<IterationTracker> tracker,
    std::size_t snapshot_ops, const std::function<void(const IterationEvent&)>& on_iteration) {
  in_flight_ = false;
  if (tracker_) return Installed::kNo;  // a pattern override won meanwhile
  if (!boundary || !tracker || snapshot_ops > history_.size() || boundary->first >= snapshot_ops) {
    next_detection_ops_ =
        std::max(history_.size(), snapshot_ops + snapshot_ops / kGrowthDivisor) + 1;
    return Installed::kNo;
  }
  boundary_ = boundary;
  tracker_ = std::move(tracker);
  periodic_from_ = boundary->first;
  pending_ = !Firm(snapshot_ops, periodic_from_);
  pending_from_iteration_ = tracker_->iterations();
  pending_shifts_ = tracker_->shifts();
  // The worker replayed the snapshot; the ops that arrived since go through the live path, where
  // they may first settle a pending boundary either way.
  std::size_t i = snapshot_ops;
  for (; pending_ && i < history_.size(); ++i) {
    tracker_->Add(history_[i]);
    WeighPending(i + 1);
    if (!tracker_) return Installed::kNo;
  }
  if (pending_) return Installed::kPending;
  for (; i < history_.size(); ++i) {
    if (tracker_->Add(history_[i])) on_iteration(tracker_->last_event());
  }
  Confirm();
  return Installed::kYes;
}

}  // namespace chameleon::daemon
