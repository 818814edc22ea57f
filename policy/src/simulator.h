// Internal: the virtual-timeline swap simulator (paper's simulator over logical layers).
//
// Each logical layer has a remaining transfer budget (seconds of link time) per direction; a
// transfer of S bytes needs S / (B · efficiency) seconds (B of its direction) and may span
// consecutive layers, taking what other transfers left (that is how concurrent transfers share a
// link).
#pragma once

#include <optional>
#include <vector>

#include "chameleon/policy/candidates.h"
#include "chameleon/policy/layers.h"
#include "chameleon/policy/options.h"
#include "chameleon/policy/plan.h"
#include "excess_tree.h"

namespace chameleon::policy::detail {

/// Not thread-safe; one per generation.
class SwapSimulator {
 public:
  /// `excess` = the excess tree of the unswapped iteration, built once per generation and
  /// borrowed: the simulator's changes are undone when it is destroyed (cheaper than copying
  /// megabytes of tree for every strategy).
  SwapSimulator(const LayerGrid& grid, ExcessTree* excess, const GeneratorOptions& options);
  ~SwapSimulator();
  SwapSimulator(const SwapSimulator&) = delete;
  SwapSimulator& operator=(const SwapSimulator&) = delete;

  /// True when no op exceeds the limit any more (the MRL is empty).
  bool Fits() const { return excess_->Max() <= 0; }
  std::int64_t MaxExcess() const { return excess_->Max(); }

  /// Tries to place `candidate` (docs/policy.md, "Simulator"). The swap-in is searched backwards
  /// from the layer before the next use, not earlier than the layer after the last op still over
  /// the limit inside the gap; what the link cannot carry there is a predicted stall.
  ///  - kOverlapOut: the swap-out starts after the last use and completes in the first layer(s)
  ///    with room; the bytes are off from the next layer on. Rejected when that relieves no op.
  ///  - kStalledOut: the bytes must be off by the first op over the limit inside the gap; what
  ///    the link cannot carry before it is a stall (the op's allocation waits for the copy).
  ///  - kStrictOverlap: like kOverlapOut, but the bytes must be off by the first op over the
  ///    limit inside the gap (a swap that relieves the whole gap, without stall on the way out).
  /// With `hidden_only`, a swap that would stall at all is rejected too.
  /// Commits and returns the swap, or returns nothing and changes nothing.
  enum class OutMode : std::uint8_t { kStrictOverlap, kOverlapOut, kStalledOut };
  std::optional<PlannedSwap> Place(const Candidate& candidate, OutMode mode,
                                   bool hidden_only = false);
  /// Puts a placed swap's bytes back on the device (its link time stays booked: conservative
  /// for the swaps that remain). For dropping swaps the plan turns out not to need.
  void Remove(const PlannedSwap& swap);
  /// Relieves a swap's bytes again (undoes Remove, or replays a swap of another run).
  void Reapply(const PlannedSwap& swap);

 private:
  struct Take {
    std::uint32_t layer;
    double seconds;
  };
  // Swap-out: consumes from layer `first` forward, at most up to `last`. Returns the layer it
  // completes in, or nothing when it does not fit by `last`.
  std::optional<std::uint32_t> PlanOut(double need, std::uint32_t first, std::uint32_t last,
                                       std::vector<Take>* takes, double* missing);
  // Where the bytes leave the device (first op off) and the swap-out stall; false: reject.
  bool PlaceOut(const Candidate& c, OutMode mode, double transfer, std::uint32_t* free_from,
                double* stall);
  // Swap-in: consumes from layer `last` backward down to `floor`. Returns the start layer and
  // the seconds it could not find (the stall before the use).
  std::uint32_t PlanIn(double need, double transfer, std::uint32_t floor, std::uint32_t last,
                       std::vector<Take>* takes, double* stall);
  // GeneratorOptions::release_at_issue: the bytes are off from the op after the last use until
  // the swap-in is issued, right after the last op over the limit in the gap.
  std::optional<PlannedSwap> PlaceAtIssue(const Candidate& c, OutMode mode, bool hidden_only);
  // Link time for `need` seconds from layer `first` forward, at most up to `last`; returns the
  // seconds found (the takes go to `takes`, not booked yet).
  double TakeForward(double need, std::uint32_t first, std::uint32_t last,
                     std::vector<Take>* takes);
  PlannedSwap Commit(const Candidate& c, std::uint32_t free_from, std::uint32_t in_start,
                     double out_s, double in_s, double out_stall, double in_stall);

  // Virtual coordinates: a swap across the iteration boundary (a tensor live across iterations,
  // idle from its last use to its first use in the next iteration) runs on a timeline of two
  // iterations back to back. Op v >= n is op v - n of the next iteration, layer l >= L is layer
  // l - L; both map onto the same memory and link time (steady state).
  std::uint32_t LayerOf(std::uint32_t op) const;
  std::uint32_t FirstOp(std::uint32_t layer) const;
  double& OutLeft(std::uint32_t layer) { return out_left_[layer % layers_]; }
  double& InLeft(std::uint32_t layer) { return (*in_left_)[layer % layers_]; }
  std::int64_t FirstOver(std::uint32_t first, std::uint32_t last) const;
  std::int64_t LastOver(std::uint32_t first, std::uint32_t last) const;
  void Relieve(std::uint32_t first, std::uint32_t last, std::uint64_t bytes);
  void Shift(std::uint32_t first, std::uint32_t last, std::int64_t delta);

  const LayerGrid& grid_;
  std::uint32_t ops_;
  std::uint32_t layers_;
  ExcessTree* excess_;
  struct Relief {
    std::uint32_t first, last;
    std::int64_t delta;  ///< added to the excess over [first, last]
  };
  std::vector<Relief> reliefs_;  ///< to undo on destruction
  double out_bandwidth_;         // effective device -> host bytes/s
  double in_bandwidth_;          // effective host -> device bytes/s
  double margin_;
  bool release_at_issue_;
  std::vector<double> out_left_;
  std::vector<double> in_storage_;
  std::vector<double>* in_left_;  ///< &in_storage_ (full duplex) or &out_left_ (shared link)
  std::vector<Take> out_takes_;
  std::vector<Take> in_takes_;
};

}  // namespace chameleon::policy::detail
