// LoopBoundary: where one client's iterations begin. Until a boundary is known it keeps the op
// history that boundary detection runs on; once one is detected (or set by a boundary pattern)
// it owns the IterationTracker that cuts iterations and runs the stage machine; when the
// boundary is lost it restarts detection from the most recent ops.
//
// A detected boundary whose periodic part covers less than three quarters of the history it was
// found in is pending: a run of identical layers at the end of a partly seen first step looks like
// a loop with a long set-up before it. It comes into force once the signature recurs twice more
// past the history and the periodic part covers three quarters of all the ops seen, and is
// rejected (detection goes on over the history kept meanwhile) when it does not recur within four
// periods or an iteration it cuts differs from the one before (a shift).
//
// Detection itself runs on a worker thread over a snapshot (TakeSnapshot / Install). Not
// thread-safe: only the loop thread touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chameleon/daemon/boundary_detector.h"
#include "chameleon/daemon/client_identity.h"
#include "chameleon/daemon/iteration_tracker.h"
#include "chameleon/daemon/options.h"

namespace chameleon::daemon {

class LoopBoundary {
 public:
  /// `options` are the daemon's (they outlive this and change only on the loop thread).
  LoopBoundary(const ClientIdentity& who, const DetectionOptions& options);

  /// Where an op went.
  enum class Route {
    kHistory,    ///< to the detection history (a pending boundary's tracker took it too)
    kTracker,    ///< a boundary is in force: the caller feeds tracker()
    kConfirmed,  ///< it confirmed a pending boundary, which is in force now (its tracker took it)
  };
  /// What a worker's detection result became.
  enum class Installed { kNo, kPending, kYes };

  /// Per op.
  Route Remember(std::uint32_t token);
  /// With a boundary known: no boundary for four iterations' worth of ops (or a whole history
  /// when no iteration was ever cut) means the loop changed; the tracker is dropped and detection
  /// starts again from the recent ops. True when that happened.
  bool CheckLost();
  /// Unless a pattern set the boundary already: `name` (token `token`) matching one of the
  /// boundary patterns becomes the boundary, replacing a detected one (its tracker is dropped,
  /// its counts kept). True when it did.
  bool TryPattern(std::uint32_t token, const std::string& name);

  bool WantsDetection(std::uint64_t now_ns) const;
  /// Copies the history for the worker and marks detection in flight.
  std::vector<std::uint32_t> TakeSnapshot(std::uint64_t now_ns);
  /// Installs a worker's result; `tracker` has consumed the snapshot, and the ops that arrived
  /// since are replayed into it (they may confirm or reject a pending boundary), each iteration
  /// it cuts while the boundary is in force passed to `on_iteration`.
  Installed Install(const std::optional<Boundary>& boundary,
                    std::optional<IterationTracker> tracker, std::size_t snapshot_ops,
                    const std::function<void(const IterationEvent&)>& on_iteration);

  /// The tracker of the boundary in force; null while none is (a pending one is not).
  IterationTracker* tracker() { return tracker_ && !pending_ ? &*tracker_ : nullptr; }
  const IterationTracker* tracker() const { return tracker_ && !pending_ ? &*tracker_ : nullptr; }
  /// The detected boundary, pending or in force (none for a pattern's).
  const std::optional<Boundary>& boundary() const { return boundary_; }
  bool pending() const { return pending_; }
  /// The boundary was set by a pattern (never lost, never detected).
  bool pattern() const { return pattern_; }
  /// Shifts and iterations over the client's life (trackers dropped when the boundary was lost
  /// included).
  std::uint64_t shifts() const { return shifts_before_ + (tracker() ? tracker()->shifts() : 0); }
  std::uint64_t iterations() const {
    return iterations_before_ + (tracker() ? tracker()->iterations() : 0);
  }
  /// Iterations the tracker had cut when the boundary came into force (the detected history
  /// replayed; 0 for a pattern's): the tracker's first_stable_iteration() counts on the same
  /// scale, so their difference is how long the stages took from the first boundary (issue 18).
  std::uint64_t found_at_iteration() const { return found_at_iteration_; }
  std::uint64_t period() const { return period_; }
  std::uint64_t losses() const { return losses_; }
  /// Detected boundaries a pattern replaced.
  std::uint64_t replaced() const { return replaced_; }
  /// Pending boundaries the stream went on to refute.
  std::uint64_t rejected() const { return rejected_; }
  std::size_t history_ops() const { return history_.size(); }

 private:
  /// The last ops while a boundary is known, so a new detection after a lost boundary sees where
  /// the current iteration began (a power of two: indexed by a mask).
  static constexpr std::size_t kRecentOps = 4096;

  /// A pending boundary's verdict after one more op, the `ops_seen`-th of the history: rejected,
  /// or no longer pending (Confirm() follows), or still pending.
  void WeighPending(std::size_t ops_seen);
  /// The boundary no longer pending comes into force; the detection history goes.
  void Confirm();
  /// The pending boundary is dropped (`why`: for the log); detection goes on over the history.
  void Reject(const char* why);

  const ClientIdentity& who_;
  const DetectionOptions& options_;
  std::vector<std::uint32_t> history_;
  std::vector<std::uint32_t> recent_;
  std::uint64_t recent_count_ = 0;
  std::size_t next_detection_ops_;
  std::size_t last_detection_ops_ = 0;  // history size of the last attempt
  std::uint64_t last_detection_ns_ = 0;
  bool in_flight_ = false;
  bool pattern_ = false;
  bool pending_ = false;
  std::uint64_t pending_from_iteration_ = 0;  // the pending tracker's count after the snapshot
  std::uint64_t pending_shifts_ = 0;          // and its shifts
  std::size_t periodic_from_ = 0;             // where the pending loop starts in history_
  std::optional<Boundary> boundary_;
  std::uint64_t period_ = 0;
  std::uint64_t found_at_iteration_ = 0;
  std::optional<IterationTracker> tracker_;
  std::uint64_t losses_ = 0;
  std::uint64_t replaced_ = 0;
  std::uint64_t rejected_ = 0;
  std::uint64_t shifts_before_ = 0;  // of trackers dropped when the boundary was lost
  std::uint64_t iterations_before_ = 0;
};

}  // namespace chameleon::daemon
