// ClientSession: everything the daemon knows about one client process. It drains the client's
// event ring and name table, routes each record to the part that owns its meaning, and moves
// the client through its stages, publishing a policy at each step:
//
//   LoopBoundary      where iterations begin: detection history, tracker and stage machine
//   IterationClock    iteration time and the generation in force at each boundary (marks)
//   SwapTraffic       the executor's swap bytes between marks (the safety net's share of a time)
//   ProfileRecorder   the detailed iteration and the profile's iteration time
//   PointerExclusions tensors the shim's pointer-table scan forbids swapping
//   CandidateTrials   GEN_POLICY's candidates, their measurements, the one STABLE chose
//   ReserveFeedback   the plan's reserve, raised when the chosen plan evicts in steady state
//   PlanMemory        the plans STABLE chose per op sequence, recalled when a sequence returns
//   SequencePredictor which sequence runs next but one, so a recalled plan can be published ahead
//   StageHold         GEN_POLICY held past stage_n while candidates are measured
//   PolicyPublisher   the client's policy mailbox
//
// The session keeps the glue: the segment and its liveness, the allocations the client reported
// live, the op names, the metric copies and the stage transitions that combine the parts. A
// feature about one client's placement or policies belongs in one of the parts (or a new one
// beside them), not here.
//
// The session never blocks and never computes anything long: boundary detection and policy
// generation are handed to the daemon (which runs them with uv_queue_work) through the
// Wants*/Take*/Install* methods. Not thread-safe: only the loop thread touches a session. Not
// movable either: its parts keep references to its identity and maps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chameleon/daemon/boundary_detector.h"
#include "chameleon/daemon/candidate_trials.h"
#include "chameleon/daemon/client_identity.h"
#include "chameleon/daemon/executor_device_view.h"
#include "chameleon/daemon/iteration_clock.h"
#include "chameleon/daemon/iteration_tracker.h"
#include "chameleon/daemon/loop_boundary.h"
#include "chameleon/daemon/metrics.h"
#include "chameleon/daemon/node_lending.h"
#include "chameleon/daemon/node_view.h"
#include "chameleon/daemon/options.h"
#include "chameleon/daemon/plan_memory.h"
#include "chameleon/daemon/pointer_exclusions.h"
#include "chameleon/daemon/policy_publisher.h"
#include "chameleon/daemon/profile_recorder.h"
#include "chameleon/daemon/reserve_feedback.h"
#include "chameleon/daemon/sequence_predictor.h"
#include "chameleon/daemon/stage_hold.h"
#include "chameleon/daemon/swap_traffic.h"
#include "chameleon/ipc/event_ring.h"
#include "chameleon/ipc/name_table.h"
#include "chameleon/ipc/segment.h"
#include "chameleon/policy/generator.h"

namespace chameleon::daemon {

/// Outcome of draining or housekeeping a session.
enum class Health : std::uint8_t { kOk, kCorrupt, kExited, kStale };

/// A candidate policy computed off the loop thread.
struct CandidateResult {
  std::uint32_t index = 0;
  std::uint64_t round = 0;  ///< CandidateTrials::round() when taken: stale once it moved on
  bool ok = false;
  std::string message;
  ipc::Policy policy;
  double seconds = 0;
};

class ClientSession {
 public:
  /// `options` is the daemon's own: it outlives the session and changes only on the loop thread
  /// (Daemon::UpdateOptions), after which the daemon calls OptionsChanged().
  ClientSession(ClientIdentity identity, ipc::Segment segment, const DaemonOptions& options,
                Metrics* metrics, std::uint64_t now_ns);
  ClientSession(const ClientSession&) = delete;
  ClientSession& operator=(const ClientSession&) = delete;

  const ClientIdentity& identity() const { return identity_; }
  /// Reads new names and up to the batch limit of records. kCorrupt: disconnect the client.
  Health Drain(std::uint64_t now_ns);
  /// Last words of a client that left cleanly (socket closed, exited): drains what it wrote
  /// before going and copies the final counters.
  void Finish(std::uint64_t now_ns);
  /// Writes the daemon heartbeat, checks the client's, copies counters into metrics.
  Health Housekeep(std::uint64_t now_ns);
  /// Why the last Drain/Housekeep failed (a precise line for the log).
  const std::string& error() const { return error_; }

  // --- Boundary detection, run by the daemon off the loop thread. ---
  bool WantsDetection(std::uint64_t now_ns) const { return loop_.WantsDetection(now_ns); }
  /// Copies the op history for the worker and marks detection in flight.
  std::vector<std::uint32_t> TakeDetectionSnapshot(std::uint64_t now_ns) {
    return loop_.TakeSnapshot(now_ns);
  }
  /// Installs a worker's result; `tracker` has already consumed the snapshot.
  void InstallDetection(std::optional<Boundary> boundary, std::optional<IterationTracker> tracker,
                        std::size_t snapshot_ops);

  // --- Candidate policies, generated by the daemon off the loop thread (session_policy.cc). ---
  bool WantsGeneration() const;
  /// The profile and options of the next candidate; marks generation in flight and names it in
  /// `result` (index and round), which the worker fills and InstallCandidate receives.
  std::pair<std::shared_ptr<const policy::Profile>, policy::GeneratorOptions> TakeGeneration(
      CandidateResult* result);
  void InstallCandidate(CandidateResult result);

  /// The daemon's options were updated live (Daemon::UpdateOptions; loop thread): stage and
  /// stability thresholds apply from the next iteration, policy settings from the next candidate,
  /// new boundary patterns to a client whose boundary is not known yet. session_options.cc.
  void OptionsChanged();

  // --- Node placement (NodeLending, daemon-wide; session_policy.cc). ---
  /// Every policy this session publishes carries its part of `node`'s placement (nullptr: none).
  void SetNode(NodeLending* node) { node_ = node; }
  /// What node placement needs to know of this client now.
  NodeClient NodeView() const;
  /// The host link of this client's GPU per direction, from the node's topology (HostLinkOf):
  /// its plans and the safety net's share of a profile's time use these figures instead of the
  /// daemon's `host_bandwidth_bytes_per_s`. std::nullopt: that setting stays in force.
  void SetHostLink(std::optional<HostLinkFigures> link) { host_link_ = link; }
  /// Publishes the policy in force again as a new generation, with the node's current leases
  /// and limit (a lease granted or revoked, a limit lowered or restored).
  void Republish();

  /// chameleonctl disable/enable: the shim passes through while disabled.
  void SetDisabled(bool disabled);
  /// Tells the shim the daemon is going away (it keeps its last policy).
  void MarkDaemonExited();

  std::shared_ptr<const policy::Profile> profile() const { return recorder_.profile(); }
  Stage stage() const { return loop_.tracker() ? loop_.tracker()->stage() : Stage::kWarmup; }
  std::uint64_t records_drained() const { return drained_; }
  std::uint64_t ops() const { return ops_; }
  /// Summary (clients) or detail (client <id>) as JSON (session_describe.cc).
  void Describe(bool detailed, nlohmann::json* out) const;

 private:
  bool HandleRecord(const ipc::RecordView& record);
  bool HandleOp(std::uint32_t token, const ipc::RecordView& record);
  /// `flags`: the mark record's RecordFlag bits (kFlagGenerationInstalled).
  void HandleMark(const ipc::IterationMarkRecord& mark, std::uint16_t flags);
  /// A device-timed interval of a layout-1.1 mark: times the profile, credits a candidate.
  /// `executor_wait_s`: the executor's measured waits within the interval (a layout-1.7 mark with
  /// kFlagExecutorWait), taken out of its time for the profile.
  void OnTimedInterval(std::uint64_t interval, double seconds,
                       std::optional<double> executor_wait_s = std::nullopt);
  void OnIteration(const IterationEvent& event);
  /// A stable WARMUP step: the detailed iteration is requested now, if none is on its way.
  void ProfileDuringWarmup();
  /// How this client's marks name generations (CandidateTrials::Marks).
  CandidateTrials::Marks MarkKind() const;
  /// STABLE's chosen plan should be planned again with a larger reserve (ReserveFeedback).
  bool WantsReplan() const;
  /// The chosen plan evicted in a steady iteration: the next reserve level, if it is larger; or,
  /// when a variant of the plan's sequence ran twice in a row, PlanVariant().
  void RaiseReserve();
  /// The plan in force ran short under a repeated variant of its sequence: GEN_POLICY again, to
  /// plan the variant as a sequence of its own (remembered under its own key).
  void PlanVariant();
  /// The reserve a plan of configuration `config` keeps at feedback `level`, under this client's
  /// limit and the chunk size its plans use.
  std::uint64_t ReserveFor(policy::GeneratorOptions config, std::uint32_t level) const;
  /// The re-plan's result: published in place of the chosen plan (session_policy.cc).
  void InstallReplan(CandidateResult result);
  /// Publishes a candidate as the next generation and starts its trial.
  void PublishCandidate(ipc::Policy policy);
  /// Publishes the candidate planned ahead once the one on trial is installed or measured.
  void PublishReadyCandidate();
  void OnStageChange(const StageStep& step);
  /// STABLE's plan in force: `chosen` (nullptr: none) published, kept as the chosen candidate
  /// (measured under its generation) and watched by ReserveFeedback when it swaps. On entering
  /// STABLE and on recalling a remembered plan.
  void PublishChosen(const CandidateTrials::Candidate* chosen);
  /// The second half of PublishChosen, for a plan already published as `generation` (one
  /// published ahead of its sequence, PredictSwitch).
  void KeepChosen(const CandidateTrials::Candidate* chosen, std::uint64_t generation);
  /// At STABLE: where the predictor says another sequence with a remembered plan runs next but
  /// one, that plan is published now (the shim is already in the next iteration and installs it
  /// at the boundary after), and the iteration's recall keeps it instead of publishing it again;
  /// where it no longer says so, the plan of the sequence in force comes back. In WARMUP (a shift
  /// to a sequence without a plan): the predicted sequence's plan rather than none
  /// (session_plans.cc).
  void PredictSwitch(const IterationEvent& event);
  /// Publishes the remembered plan of `sequence`, expected kPredictAhead iterations after
  /// `event`'s, if there is one (predicted_).
  void PublishAhead(const SequenceKey& sequence, const IterationEvent& event);
  /// Counts a prediction whose iteration `event` is: it ran another sequence (a miss).
  void ScorePrediction(const IterationEvent& event);
  /// STABLE chose `chosen` (nullptr: none), or re-planned it: PlanMemory keeps it under the
  /// sequence STABLE was entered with (stable_sequence_), so a re-plan made while a near variant
  /// of it runs (similar enough not to be a shift) replaces the plan of that sequence.
  void RememberPlan(const CandidateTrials::Candidate* chosen);
  /// The iteration just cut ran `sequence`, which PlanMemory has a plan for under this limit:
  /// that plan is published again and the stage is STABLE at once. False on a miss.
  bool RecallPlan(const SequenceKey& sequence);
  /// The planning of the sequence profiled (profile_sequence_) is left before STABLE chose:
  /// PlanMemory keeps its profile and, with `trials` (in GEN_POLICY, planned from that profile),
  /// the trials so far. Nothing without a fresh profile of a known sequence.
  void SuspendPlanning(bool trials);
  /// The recorder's profile was `before` until the record just handled: a new one is of the
  /// iteration the tracker cut last, its detailed iteration (profile_sequence_).
  void NoteProfileSequence(const policy::Profile* before);
  /// The iteration just cut ran `sequence`, whose planning was suspended under this limit: its
  /// trials go on in GEN_POLICY from what they measured. False on a miss.
  bool ResumePlanning(const SequenceKey& sequence);
  /// Candidates are being tried and not all configurations are measured yet: GEN_POLICY is
  /// held past stage_n (session_policy.cc).
  bool CandidatesPending() const;
  /// STABLE chose `best` (nullptr: none): counts and logs a STABLE stage without a plan while a
  /// device limit needs one (chameleon_policy_empty_stable_total).
  void ReportEmptyStable(const CandidateTrials::Candidate* best);
  /// A detected boundary came into force: logged, published, and the stages caught up when the
  /// loop was past WARMUP before the boundary was known.
  void AnnounceBoundary();
  /// The boundary changed (lost, replaced by a pattern, or re-detected): the detailed profile
  /// and the candidates planned from it belong to the old iteration.
  void ForgetProfile();
  /// The recorded profile's op count is that of the current iteration (within 2x).
  bool ProfileFitsIteration() const;
  void UpdateStageHold(std::uint64_t now_ns);
  /// Publishes `base` (nullptr: the stage and boundary only) with the current stage.
  void Publish(const ipc::Policy* base);
  void CopyCounters();
  /// The device limit a candidate is planned for (0: none, nothing to plan): OwnLimit() less what
  /// the node lent of this client's GPU.
  std::uint64_t DeviceLimit() const;
  /// The limit the operator, the job and the device allow this client (before any lending).
  std::uint64_t OwnLimit() const;
  /// The device the shim's executor serves, by the client's ordinal (segment executor_device −
  /// 1), or -1 while undecided (or from an older shim, or out of range: the field is untrusted).
  int ExecutorOrdinal() const;

  ClientIdentity identity_;
  ipc::Segment segment_;
  ipc::EventRingConsumer ring_;
  ipc::NameTableReader names_reader_;
  const DaemonOptions& options_;
  Metrics* metrics_;
  SlotMetrics* slot_metrics_;
  std::string error_;
  std::uint64_t attached_ns_;
  std::uint64_t drain_now_ns_ = 0;  // `now` of the Drain in progress
  bool disabled_ = false;

  std::unordered_map<std::uint32_t, std::string> names_;
  std::unordered_map<std::uint64_t, LiveAllocation> live_;

  LoopBoundary loop_;
  IterationClock clock_;
  SwapTraffic traffic_;
  ProfileRecorder recorder_;
  PointerExclusions exclusions_;
  ExecutorDeviceView device_view_;
  CandidateTrials trials_;
  ReserveFeedback feedback_;
  PlanMemory plans_;
  // Every iteration cut since the boundary was set; guesses for the iteration a plan published now
  // is installed at (PredictSwitch).
  static constexpr std::size_t kPredictAhead = 2;
  SequencePredictor predictor_{kPredictAhead};
  // A plan published ahead of its sequence (PredictSwitch): the sequence, the generation it was
  // published as (no longer in force once another is published) and the iteration it is for
  // (0: scored, ScorePrediction).
  struct Predicted {
    SequenceKey sequence;
    std::uint64_t generation = 0;
    std::uint64_t iteration = 0;
  } predicted_;
  std::uint64_t predicted_switches_ = 0;
  std::uint64_t predicted_misses_ = 0;
  // The op sequence the plan in force was remembered under: its profile's (profile_sequence_),
  // or, unknown, that of the iteration STABLE was entered at.
  SequenceKey stable_sequence_;
  SequenceKey last_sequence_;  // of the last iteration cut
  // The exact sequence of the recorder's profile (its detailed iteration), empty when unknown:
  // what a plan from it is remembered under, since its anchors bind exactly there.
  SequenceKey profile_sequence_;
  bool variant_repeated_ = false;  // STABLE, and the last two iterations ran one other sequence
  // STABLE, the last iteration ran another sequence and the one before it the plan's own.
  bool variant_first_ = false;
  std::uint64_t variant_plans_ = 0;       // PlanVariant() calls
  bool replan_in_flight_ = false;         // a re-plan is with a worker (InstallCandidate routes it)
  std::uint64_t last_reserve_bytes_ = 0;  // the reserve of the last plan generated
  StageHold hold_;
  PolicyPublisher publisher_;
  NodeLending* node_ = nullptr;
  std::optional<HostLinkFigures> host_link_;
  /// `options` with this client's host link (SetHostLink) in place of the configured figure.
  policy::GeneratorOptions WithHostLink(policy::GeneratorOptions options) const;
  // The last policy published, as planned (before the node's decoration): what Republish() sends
  // again and what the node's placement reads this client's demand from.
  std::optional<ipc::Policy> base_;
  // The first generation published after the last one with swaps (a profile may be timed by
  // intervals under it or later); swaps_published_: the last one published had swaps.
  std::uint64_t no_swaps_since_ = 0;
  bool swaps_published_ = true;

  // Counters copied into metrics (deltas since the last copy).
  std::uint64_t drained_ = 0;
  std::uint64_t ops_ = 0;
  std::uint64_t unknown_records_ = 0;  // well-framed records of types this daemon does not know
  struct Copied {
    std::uint64_t drained, ops, dropped, repaired, iterations, shifts, generations;
  } copied_{};
  ExecutorMetricsCopy executor_copy_;
};

}  // namespace chameleon::daemon
