// CandidateTrials: GEN_POLICY's candidate policies for one client (docs/detection.md §4): the
// generator configurations to try, the candidates published from them with the best device time
// measured under each, and the one STABLE chose.
//
// One candidate on trial at a time. With marks that say which generation the shim's executor
// installed at each boundary (kFlagGenerationInstalled), the next candidate is planned while the
// last one is on trial and published as soon as the shim installed the last one, so each one
// runs exactly the iterations it is measured on; with layout-1.1 marks without that flag, the next
// is generated once the last one has a measurement of its own; with 1.0 marks, one per step.
// A candidate that plans the same swaps as one already published is not published again (two
// configurations that plan the same policy need one measurement): it is counted as a duplicate
// and the next configuration is generated at once, so fewer distinct candidates take fewer trial
// iterations. The policy generation itself runs on a worker thread between Take() and
// Finished(); the object is not thread-safe and only the loop thread touches it.
//
// Per-client placement destinations (host NUMA node, peer GPU) are a property of the
// configurations (configs_) and of the policies they yield, not of this bookkeeping.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/policy/generator.h"

namespace chameleon::daemon {

class CandidateTrials {
 public:
  struct Candidate {
    std::uint64_t generation = 0;  ///< the mailbox generation it was published as
    ipc::Policy policy;
    double measured_s = 0;  ///< best device time of the intervals run entirely under it
    std::uint32_t samples = 0;
    bool installed = false;  ///< a mark said the shim's executor installed it
    /// PointerExclusions::version() of the profile it was planned from: a target reported since
    /// may be a tensor it swaps, which the shim now pins (so the plan is short of those bytes).
    std::uint64_t exclusions = 0;
    std::uint32_t config = 0;  ///< index of the configuration it was planned from
  };

  /// What the client's marks tell about the generation in force (IterationClock).
  enum class Marks : std::uint8_t {
    kNone,        ///< layout 1.0: neither interval nor generation; one candidate per step
    kGeneration,  ///< layout 1.1: the generation at each boundary; the next after a measurement
    kInstalled,   ///< kFlagGenerationInstalled: planned ahead, published once the last installed
  };

  explicit CandidateTrials(std::vector<policy::GeneratorOptions> configs)
      : configs_(std::move(configs)) {}

  /// New settings (a live options update): the next candidate is generated from them; those
  /// already published keep theirs (their measurements stay comparable to their predictions).
  void SetConfigs(std::vector<policy::GeneratorOptions> configs) { configs_ = std::move(configs); }
  /// What GEN_POLICY has measured of one sequence, kept while another runs (PlanMemory): the
  /// candidates published and the next configuration to plan. One being generated or waiting to
  /// be published is planned again on the return (`next` goes back to its configuration), and so
  /// is one still unmeasured then (Resume): the same profile and configuration plan the same
  /// swaps, and only this sequence's own iterations measure it.
  struct Progress {
    std::vector<Candidate> candidates;
    std::uint32_t next = 0;
    std::uint32_t duplicates = 0;
    std::string error;
    /// Intervals that began before this boundary ran the suspended sequence: the device time of
    /// the last ones arrives after the shift that suspended it (Credit).
    std::uint64_t credit_before = 0;
    /// A device-timed interval that began at boundary `interval`, run entirely under
    /// `generation`: credited to that candidate if it ran this sequence. True when credited.
    bool Credit(std::uint64_t generation, std::uint64_t interval, double seconds);
  };

  /// A new stable sequence: every configuration is tried again.
  void Restart();
  /// The trials so far, to go on from later (Resume). The object itself is unchanged.
  Progress Suspend() const;
  /// A sequence whose GEN_POLICY was cut short came back: its trials go on from `progress`,
  /// as after Restart() but with what was measured kept.
  void Resume(Progress progress);
  /// Grows with each Restart() and Resume(): a generation taken under another round (Take) was
  /// planned for trials that are no longer these.
  std::uint64_t round() const { return round_; }
  /// A worker finished a generation of an earlier round: nothing of it is kept.
  void Dropped() { in_flight_ = false; }
  /// A GEN_POLICY step passed: a next candidate may be generated.
  void StepPassed() { step_pending_ = true; }

  /// The next candidate may be generated now (given a timed profile): none in flight or waiting
  /// to be published, configurations left, and (kGeneration) the last candidate measured and a
  /// step passed, or (kNone) a step passed; with kInstalled at once (planned ahead).
  bool WantsNext(Marks marks) const;
  /// A candidate just generated may be published now: none published yet, or the last one was
  /// installed by the shim or measured. Always with kNone and kGeneration (WantsNext waited).
  bool MayPublish(Marks marks) const;
  /// A generated candidate that must wait (MayPublish false): kept until TakeReady().
  void Hold(ipc::Policy policy) { ready_ = std::move(policy); }
  /// A mark says the shim's executor installed `generation`: true when that is the last
  /// candidate published and it was not known installed before.
  bool Installed(std::uint64_t generation);
  /// The candidate waiting to be published, if any (and no longer kept).
  std::optional<ipc::Policy> TakeReady();
  /// The next configuration; marks generation in flight. `*index` is its position; `exclusions`
  /// the pointer-exclusion version of the profile it is planned from (Candidate::exclusions).
  policy::GeneratorOptions Take(std::uint32_t* index, std::uint64_t exclusions = 0);
  /// The worker finished: `error` is empty on success, else why no policy was planned.
  void Finished(std::string error);
  /// The candidate generated last was published as `generation`.
  void Add(std::uint64_t generation, ipc::Policy policy);
  /// A published candidate with the same swaps as `policy` (entries and exclusions; the summary's
  /// predictions may differ), or nullptr: the shim would run both alike.
  const Candidate* Find(const ipc::Policy& policy) const;
  /// The candidate generated last duplicates the one published as `same`: not published, and
  /// the next configuration may be generated without waiting for a step. The same swaps planned
  /// under newer exclusions are valid under them: `same` takes the newer version.
  void AddDuplicate(std::uint64_t same);
  /// Configurations whose candidate duplicated an earlier one since the last Restart().
  std::uint32_t duplicates() const { return duplicates_; }
  /// Why the last configuration planned no policy (empty: it did).
  const std::string& error() const { return error_; }

  /// Credits a device-timed interval run entirely under `generation`: to its candidate while
  /// `measuring` (GEN_POLICY; frozen once STABLE chose) and to the chosen policy republished in
  /// STABLE. True when this gave the last candidate its first measurement.
  bool Credit(std::uint64_t generation, double seconds, bool measuring);
  /// A layout-1.0 shim's marks say neither interval nor generation: credits the candidate the
  /// shim says it applies now.
  void CreditApplied(std::uint64_t applied, double seconds);

  /// Work remains before every configuration is measured (given a timed profile and no other
  /// reason to wait): a generation in flight, configurations left (`device_limited`: there is a
  /// limit to plan for), or the last candidate unmeasured. False when the generator cannot plan
  /// this profile at all.
  bool Pending(bool device_limited) const;
  /// The best measured device time; with no measurement at all, the first candidate. Only
  /// candidates planned under `exclusions` (the current version) compete while there is one.
  const Candidate* Best(std::uint64_t exclusions = 0) const;
  /// Candidates planned under another pointer-exclusion version than `exclusions`.
  std::size_t Stale(std::uint64_t exclusions) const;
  /// The policy published as `from` was published again, unchanged but for its placement, as
  /// `to` (node placement's leases): intervals under `to` count for the same candidate.
  void Republished(std::uint64_t from, std::uint64_t to);
  /// STABLE: `best` (Best(), or nullptr) is chosen and was republished as `generation`.
  void Choose(const Candidate* best, std::uint64_t generation);
  /// The candidate STABLE chose, or nullptr.
  const Candidate* chosen() const { return chosen_ ? &*chosen_ : nullptr; }
  /// Configuration `index` as it is now (SetConfigs may have changed them since: past the end,
  /// the last one; none at all, the defaults).
  policy::GeneratorOptions config(std::uint32_t index) const;
  /// The chosen candidate's configuration planned again (ReserveFeedback) and published as
  /// `generation`: it is the chosen one from now on, measured afresh.
  void Rechoose(std::uint64_t generation, ipc::Policy policy);

  /// Grows with each candidate taken, published and measured (the stage hold's progress).
  std::uint64_t progress() const;
  std::size_t configs() const { return configs_.size(); }
  const std::vector<Candidate>& candidates() const { return candidates_; }
  /// The candidates, the chosen one, the one in force (`applied` by the shim, with the last
  /// iteration's `iteration_s`) and the last generation error, into chameleonctl's "policy".
  void Describe(std::uint64_t applied, double iteration_s, nlohmann::json* out) const;

 private:
  std::vector<policy::GeneratorOptions> configs_;
  std::vector<Candidate> candidates_;
  std::uint32_t next_ = 0;     // index of the next configuration
  bool step_pending_ = false;  // a GEN_POLICY step has passed since the last candidate
  bool in_flight_ = false;
  std::uint64_t taken_exclusions_ = 0;  // Take()'s: of the candidate generated last
  std::uint32_t taken_config_ = 0;      // Take()'s index: of the candidate generated last
  std::optional<ipc::Policy> ready_;    // generated ahead, waiting for the last to be installed
  std::uint32_t duplicates_ = 0;
  std::string error_;
  std::optional<Candidate> chosen_;
  std::uint64_t chosen_generation_ = 0;  // the chosen policy's generation republished in STABLE
  // Not reset by Restart() or Resume(): a worker still out is the session's, whichever trials
  // it was started for (in_flight_ likewise).
  std::uint64_t round_ = 0;
};

}  // namespace chameleon::daemon
