// Test support: the optimum of the timeline model by exhaustive search, written independently of
// the generator. The model (docs/policy.md): logical layers with link time per direction; a swap
// of tensor t over gap (last, next) books its swap-out from the layer of op last+1 forward (it
// may span layers) and frees the bytes from the layer after it completes; its swap-in is booked
// backwards from the layer before `next`, no earlier than the layer after the last op still over
// the limit inside the gap, needing transfer·(1 + margin); what is missing is stall (without the
// margin); with no layer left before the use, the swap-in starts after the last op over the limit
// and stalls fully. A swap-out may also be "stalled": the bytes leave at the first op over the
// limit and the compute waits for what the link could not carry before. The search tries every
// order of every subset of (tensor, gap) candidates, each in both swap-out modes.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "chameleon/policy/options.h"
#include "chameleon/policy/profile.h"
#include "independent_replay.h"

namespace chameleon::policy::testing {

struct BruteResult {
  bool resolved = true;  ///< false when the node budget ran out
  bool feasible = false;
  double min_stall = std::numeric_limits<double>::infinity();
  std::vector<std::uint32_t> best_order;  ///< (tensor << 16 | last use) << 1 | stalled
};

class BruteForce {
 public:
  BruteForce(const Profile& p, const GeneratorOptions& o) : p_(p), o_(o) { Setup(); }

  BruteResult Solve() {
    State s;
    s.out.assign(layer_time_.begin(),
                 layer_time_.begin() + static_cast<std::ptrdiff_t>(layer_time_.size() / 2));
    s.in = s.out;
    const std::vector<std::int64_t> mem = ReplayWithPlan(p_, {});
    for (std::int64_t m : mem)
      s.excess.push_back(m - static_cast<std::int64_t>(o_.device_limit_bytes));
    Search(s, 0);
    return result_;
  }

 private:
  struct Gap {
    std::uint32_t tensor, last, next;
  };
  struct State {
    std::vector<double> out, in;  // `in` unused when the link is shared
    std::vector<std::int64_t> excess;
    double stall = 0;
  };

  void Setup() {
    // Layers: phase runs (labelled), each split into min(layers_per_phase, len) equal groups.
    const std::size_t n = p_.ops.size();
    std::size_t begin = 0;
    layer_of_.assign(n, 0);
    for (std::size_t i = 1; i <= n; ++i) {
      if (i < n && p_.ops[i].phase == p_.ops[begin].phase) continue;
      const std::size_t len = i - begin;
      const std::size_t groups = std::min<std::size_t>(o_.layers_per_phase, len);
      for (std::size_t g = 0; g < groups; ++g) {
        const std::size_t a = begin + g * len / groups, b = begin + (g + 1) * len / groups;
        first_op_.push_back(static_cast<std::uint32_t>(a));
        layer_time_.push_back(p_.iteration_s / n * (b - a));
        for (std::size_t k = a; k < b; ++k)
          layer_of_[k] = static_cast<std::uint32_t>(first_op_.size() - 1);
      }
      begin = i;
    }
    // Two iterations back to back: op i + n and layer l + L are the next iteration's.
    const std::size_t layers = first_op_.size();
    for (std::size_t i = 0; i < n; ++i) {
      layer_of_.push_back(layer_of_[i] + static_cast<std::uint32_t>(layers));
    }
    for (std::size_t l = 0; l < layers; ++l) {
      first_op_.push_back(first_op_[l] + static_cast<std::uint32_t>(n));
      layer_time_.push_back(layer_time_[l]);
    }
    for (std::uint32_t t = 0; t < p_.tensors.size(); ++t) {
      const ProfileTensor& x = p_.tensors[t];
      if (!x.swappable || x.bytes == 0 || x.bytes < o_.min_swap_bytes) continue;
      std::vector<std::uint32_t> uses = x.uses;
      // Live across iterations: also idle from its last use to its first use next iteration.
      if (o_.cross_iteration && x.alloc_op < 0 && x.free_op < 0 && !uses.empty()) {
        uses.push_back(uses.front() + static_cast<std::uint32_t>(n));
      }
      for (std::size_t k = 1; k < uses.size(); ++k) {
        if (layer_of_[uses[k]] >= layer_of_[uses[k - 1]] + 2) {
          gaps_.push_back({t, uses[k - 1], uses[k]});
        }
      }
    }
  }

  std::vector<double>& InLink(State& s) const { return o_.full_duplex ? s.in : s.out; }

  // `stalled`: the bytes must be off by the first op over the limit in the gap; the compute
  // waits for whatever part of the swap-out the link could not carry before that op's layer.
  bool Place(const Gap& g, State& s, bool stalled) const {
    const double tau =
        p_.tensors[g.tensor].bytes / (o_.host_bandwidth_bytes_per_s * o_.link_efficiency);
    const std::uint32_t start = layer_of_[g.last + 1], use = layer_of_[g.next];
    const std::size_t n = p_.ops.size(), layers = s.out.size();  // indices fold mod these
    std::int64_t first_over = -1;
    for (std::uint32_t i = g.last + 1; i < g.next && first_over < 0; ++i) {
      if (s.excess[i % n] > 0) first_over = i;
    }
    std::int64_t end_layer = static_cast<std::int64_t>(use) - 2;  // last layer the copy may use
    if (stalled) {
      if (first_over < 0) return false;
      end_layer = static_cast<std::int64_t>(layer_of_[first_over]) - 1;
    }
    double rest = tau;
    std::int64_t done = -1;
    std::vector<double> out = s.out;
    for (std::int64_t l = start; l <= end_layer; ++l) {
      const double take = std::min(out[l % layers], rest);
      out[l % layers] -= take;
      rest -= take;
      if (rest <= 1e-15) {
        done = l;
        break;
      }
    }
    double stall = 0;
    std::uint32_t free_from = 0;
    if (done >= 0) {
      free_from = first_op_[done + 1];
    } else if (stalled) {
      free_from = static_cast<std::uint32_t>(first_over);
      stall = rest;
    } else {
      return false;
    }
    std::int64_t last_over = -1;
    for (std::uint32_t i = free_from; i < g.next; ++i) {
      if (s.excess[i % n] > 0) last_over = i;
    }
    if (last_over < 0) return false;
    s.out = out;
    const std::uint32_t floor = layer_of_[last_over] + 1;
    std::uint32_t in_start = static_cast<std::uint32_t>(last_over + 1);
    double in_stall = tau;
    if (floor < use) {
      std::vector<double>& in = InLink(s);
      const double need = tau * (1 + o_.prefetch_margin);
      double found = 0;
      std::uint32_t in_layer = floor;
      in_stall = -1;
      for (std::uint32_t l = use; l-- > floor;) {
        const double take = std::min(in[l % layers], need - found);
        in[l % layers] -= take;
        found += take;
        if (need - found <= 1e-15) {
          in_layer = l;
          in_stall = 0;
          break;
        }
      }
      if (in_stall < 0) in_stall = std::max(0.0, tau - found);
      in_start = first_op_[in_layer];
    }
    for (std::uint32_t i = free_from; i < in_start; ++i) {
      s.excess[i % n] -= static_cast<std::int64_t>(p_.tensors[g.tensor].bytes);
    }
    s.stall += stall + in_stall;
    return true;
  }

  void Search(const State& s, std::uint32_t used) {
    if (++nodes_ > kNodeBudget) {
      result_.resolved = false;
      return;
    }
    if (*std::max_element(s.excess.begin(), s.excess.end()) <= 0) {
      result_.feasible = true;
      if (s.stall < result_.min_stall) {
        result_.min_stall = s.stall;
        result_.best_order = path_;
      }
      return;
    }
    if (s.stall >= result_.min_stall) return;
    for (std::uint32_t c = 0; c < gaps_.size(); ++c) {
      if (used & (1u << c)) continue;
      for (bool stalled : {false, true}) {
        State next = s;
        if (!Place(gaps_[c], next, stalled)) continue;
        path_.push_back(((gaps_[c].tensor << 16 | gaps_[c].last) << 1) | stalled);
        Search(next, used | (1u << c));
        path_.pop_back();
      }
    }
  }

  static constexpr std::uint64_t kNodeBudget = 3'000'000;
  const Profile& p_;
  const GeneratorOptions& o_;
  std::vector<std::uint32_t> layer_of_, first_op_;
  std::vector<double> layer_time_;
  std::vector<Gap> gaps_;
  std::uint64_t nodes_ = 0;
  std::vector<std::uint32_t> path_;
  BruteResult result_;
};

}  // namespace chameleon::policy::testing
