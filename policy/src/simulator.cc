#include "simulator.h"

#include <algorithm>

namespace chameleon::policy::detail {
namespace {

// Link time below this is rounding noise, not room for a transfer.
constexpr double kEpsilonS = 1e-15;

}  // namespace

SwapSimulator::SwapSimulator(const LayerGrid& grid, ExcessTree* excess,
                             const GeneratorOptions& options)
    : grid_(grid),
      ops_(static_cast<std::uint32_t>(grid.layer_of_op.size())),
      layers_(static_cast<std::uint32_t>(grid.layers.size())),
      excess_(excess),
      out_bandwidth_(OutBandwidth(options) * options.link_efficiency),
      in_bandwidth_(InBandwidth(options) * options.link_efficiency),
      margin_(options.prefetch_margin),
      release_at_issue_(options.release_at_issue) {
  out_left_.reserve(grid.layers.size());
  for (const LogicalLayer& layer : grid.layers) out_left_.push_back(layer.time_s);
  if (options.full_duplex) {
    in_storage_ = out_left_;
    in_left_ = &in_storage_;
  } else {
    in_left_ = &out_left_;
  }
}

std::uint32_t SwapSimulator::LayerOf(std::uint32_t op) const {
  return op < ops_ ? grid_.layer_of_op[op] : grid_.layer_of_op[op - ops_] + layers_;
}

std::uint32_t SwapSimulator::FirstOp(std::uint32_t layer) const {
  return layer < layers_ ? grid_.layers[layer].first_op
                         : grid_.layers[layer - layers_].first_op + ops_;
}

std::int64_t SwapSimulator::FirstOver(std::uint32_t first, std::uint32_t last) const {
  if (first > last) return -1;
  if (first < ops_) {
    const std::int64_t found = excess_->FirstPositive(first, std::min(last, ops_ - 1));
    if (found >= 0 || last < ops_) return found;
    first = ops_;
  }
  const std::int64_t wrapped = excess_->FirstPositive(first - ops_, last - ops_);
  return wrapped < 0 ? -1 : wrapped + ops_;
}

std::int64_t SwapSimulator::LastOver(std::uint32_t first, std::uint32_t last) const {
  if (first > last) return -1;
  if (last >= ops_) {
    const std::int64_t wrapped =
        excess_->LastPositive(first >= ops_ ? first - ops_ : 0, last - ops_);
    if (wrapped >= 0) return wrapped + ops_;
    if (first >= ops_) return -1;
    last = ops_ - 1;
  }
  return excess_->LastPositive(first, last);
}

SwapSimulator::~SwapSimulator() {
  for (auto it = reliefs_.rbegin(); it != reliefs_.rend(); ++it) {
    excess_->Add(it->first, it->last, -it->delta);
  }
}

void SwapSimulator::Shift(std::uint32_t first, std::uint32_t last, std::int64_t delta) {
  const auto add = [&](std::uint32_t a, std::uint32_t b) {
    excess_->Add(a, b, delta);
    reliefs_.push_back({a, b, delta});
  };
  if (first < ops_) add(first, std::min(last, ops_ - 1));
  if (last >= ops_) add(first >= ops_ ? first - ops_ : 0, last - ops_);
}

void SwapSimulator::Relieve(std::uint32_t first, std::uint32_t last, std::uint64_t bytes) {
  Shift(first, last, -static_cast<std::int64_t>(bytes));
}

void SwapSimulator::Remove(const PlannedSwap& swap) {
  const std::uint64_t bytes = swap.device_bytes != 0 ? swap.device_bytes : swap.bytes;
  Shift(swap.free_from_op, swap.in_start_op - 1, static_cast<std::int64_t>(bytes));
}

void SwapSimulator::Reapply(const PlannedSwap& swap) {
  const std::uint64_t bytes = swap.device_bytes != 0 ? swap.device_bytes : swap.bytes;
  Shift(swap.free_from_op, swap.in_start_op - 1, -static_cast<std::int64_t>(bytes));
}

std::optional<std::uint32_t> SwapSimulator::PlanOut(double need, std::uint32_t first,
                                                    std::uint32_t last, std::vector<Take>* takes,
                                                    double* missing) {
  takes->clear();
  for (std::uint32_t l = first; l <= last && first <= last; ++l) {
    const double take = std::min(OutLeft(l), need);
    if (take > kEpsilonS) takes->push_back({l, take});
    need -= take;
    if (need <= kEpsilonS) {
      *missing = 0;
      return l;
    }
  }
  *missing = need;
  return std::nullopt;
}

bool SwapSimulator::PlaceOut(const Candidate& c, OutMode mode, double transfer,
                             std::uint32_t* free_from, double* stall) {
  const std::uint32_t start_layer = LayerOf(c.last_use_op + 1);
  const std::uint32_t use_layer = LayerOf(c.next_use_op);
  double missing = 0;
  *stall = 0;
  if (mode == OutMode::kOverlapOut) {
    // The latest useful completion leaves one layer off the device before the use layer.
    if (use_layer < start_layer + 2) return false;
    const auto done = PlanOut(transfer, start_layer, use_layer - 2, &out_takes_, &missing);
    if (!done) return false;
    *free_from = FirstOp(*done + 1);
    return true;  // Place rejects it when nothing over the limit is left after free_from
  }
  const std::int64_t first_over = FirstOver(c.last_use_op + 1, c.next_use_op - 1);
  if (first_over < 0) return false;
  const std::uint32_t need_layer = LayerOf(static_cast<std::uint32_t>(first_over));
  const auto done = need_layer == 0
                        ? std::nullopt
                        : PlanOut(transfer, start_layer, need_layer - 1, &out_takes_, &missing);
  if (need_layer == 0) out_takes_.clear(), missing = transfer;
  if (mode == OutMode::kStrictOverlap && !done) return false;
  if (done) {
    *free_from = FirstOp(*done + 1);
  } else {
    *free_from = static_cast<std::uint32_t>(first_over);
    *stall = missing;
  }
  return true;
}

std::uint32_t SwapSimulator::PlanIn(double need, double transfer, std::uint32_t floor,
                                    std::uint32_t last, std::vector<Take>* takes, double* stall) {
  takes->clear();
  double found = 0;
  for (std::uint32_t l = last + 1; l-- > floor;) {
    const double take = std::min(InLeft(l), need - found);
    if (take > kEpsilonS) takes->push_back({l, take});
    found += take;
    if (need - found <= kEpsilonS) {
      *stall = 0;
      return l;
    }
  }
  // Not enough room after the last op over the limit: start as early as allowed and wait for
  // the rest before the use (the margin is a safety reserve, not part of the stall).
  *stall = std::max(0.0, transfer - found);
  return floor;
}

std::optional<PlannedSwap> SwapSimulator::Place(const Candidate& c, OutMode mode,
                                                bool hidden_only) {
  if (release_at_issue_) return PlaceAtIssue(c, mode, hidden_only);
  const std::uint32_t use_layer = LayerOf(c.next_use_op);
  const double out_s = static_cast<double>(c.bytes) / out_bandwidth_;
  const double in_s = static_cast<double>(c.bytes) / in_bandwidth_;
  std::uint32_t free_from = 0;
  double out_stall = 0;
  if (!PlaceOut(c, mode, out_s, &free_from, &out_stall)) return std::nullopt;
  const std::int64_t last_over = LastOver(free_from, c.next_use_op - 1);
  if (last_over < 0) return std::nullopt;
  // Not earlier than the peak: the swap-in may start only after the last op it relieves.
  const std::uint32_t floor = LayerOf(static_cast<std::uint32_t>(last_over)) + 1;
  // The swap-out is booked first: on a shared (half-duplex) link the swap-in must see what the
  // swap-out took.
  for (const Take& t : out_takes_) OutLeft(t.layer) -= t.seconds;
  // No layer between the peak and the use: the swap-in is issued right after the last op over
  // the limit and the use waits for all of it.
  double in_stall = in_s;
  auto in_start = static_cast<std::uint32_t>(last_over + 1);
  in_takes_.clear();
  if (floor < use_layer) {
    const std::uint32_t in_layer =
        PlanIn(in_s * (1 + margin_), in_s, floor, use_layer - 1, &in_takes_, &in_stall);
    in_start = FirstOp(in_layer);
  }
  if (hidden_only && out_stall + in_stall > 0) {
    for (const Take& t : out_takes_) OutLeft(t.layer) += t.seconds;  // roll back
    return std::nullopt;
  }
  for (const Take& t : in_takes_) InLeft(t.layer) -= t.seconds;
  return Commit(c, free_from, in_start, out_s, in_s, out_stall, in_stall);
}

PlannedSwap SwapSimulator::Commit(const Candidate& c, std::uint32_t free_from,
                                  std::uint32_t in_start, double out_s, double in_s,
                                  double out_stall, double in_stall) {
  const std::uint64_t device_bytes = c.device_bytes != 0 ? c.device_bytes : c.bytes;
  Relieve(free_from, in_start - 1, device_bytes);
  PlannedSwap swap;
  swap.tensor = c.tensor;
  swap.bytes = c.bytes;
  swap.device_bytes = device_bytes;
  swap.out_after_op = c.last_use_op;
  swap.free_from_op = free_from;
  swap.in_start_op = in_start;
  swap.use_op = c.next_use_op;
  swap.transfer_s = out_s;
  swap.in_transfer_s = in_s;
  swap.out_stall_s = out_stall;
  swap.stall_s = out_stall + in_stall;
  swap.score = c.score;
  return swap;
}

double SwapSimulator::TakeForward(double need, std::uint32_t first, std::uint32_t last,
                                  std::vector<Take>* takes) {
  takes->clear();
  double found = 0;
  for (std::uint32_t l = first; l <= last && first <= last && need - found > kEpsilonS; ++l) {
    const double take = std::min(InLeft(l), need - found);
    if (take > kEpsilonS) takes->push_back({l, take});
    found += take;
  }
  return found;
}

std::optional<PlannedSwap> SwapSimulator::PlaceAtIssue(const Candidate& c, OutMode mode,
                                                       bool hidden_only) {
  // The executor releases the memory when the swap-out is issued, right after the last use:
  // whoever takes it first (the first op over the limit) waits for the copy on the device.
  const std::uint32_t free_from = c.last_use_op + 1;
  const std::int64_t first_over = FirstOver(free_from, c.next_use_op - 1);
  if (first_over < 0) return std::nullopt;  // relieves nothing
  const auto last_over = static_cast<std::uint32_t>(LastOver(free_from, c.next_use_op - 1));
  const double out_s = static_cast<double>(c.bytes) / out_bandwidth_;
  const double in_s = static_cast<double>(c.bytes) / in_bandwidth_;
  // Swap-out: link time from the layer after the last use up to the layer before the first op
  // that needs the memory; what is missing there is that op's wait.
  const std::uint32_t start_layer = LayerOf(free_from);
  const std::uint32_t need_layer = LayerOf(static_cast<std::uint32_t>(first_over));
  double out_stall = out_s;
  out_takes_.clear();
  if (need_layer > start_layer) {
    double missing = 0;
    PlanOut(out_s, start_layer, need_layer - 1, &out_takes_, &missing);
    out_stall = missing;
  }
  if (mode == OutMode::kStrictOverlap && out_stall > 0) return std::nullopt;
  // Swap-in: issued as soon as the memory is no longer needed (the op after the last one over
  // the limit); it has the link from there to the layer before the use.
  const std::uint32_t in_start = last_over + 1;
  const std::uint32_t in_layer = LayerOf(in_start);
  const std::uint32_t use_layer = LayerOf(c.next_use_op);
  // On a shared link the swap-in must see what the swap-out takes: book that first.
  for (const Take& t : out_takes_) OutLeft(t.layer) -= t.seconds;
  double found = 0;
  in_takes_.clear();
  if (use_layer > in_layer)
    found = TakeForward(in_s * (1 + margin_), in_layer, use_layer - 1, &in_takes_);
  const double in_stall = std::max(0.0, in_s - found);
  if (hidden_only && out_stall + in_stall > 0) {
    for (const Take& t : out_takes_) OutLeft(t.layer) += t.seconds;  // roll back
    return std::nullopt;
  }
  for (const Take& t : in_takes_) InLeft(t.layer) -= t.seconds;
  return Commit(c, free_from, in_start, out_s, in_s, out_stall, in_stall);
}

}  // namespace chameleon::policy::detail
