#include "chameleon/daemon/boundary_detector.h"

#include <algorithm>
#include <unordered_map>

namespace chameleon::daemon {
namespace {

/// Fraction of gaps that may be short (an extra occurrence inside an iteration) or about twice
/// the median (one occurrence lost to a removed op or a dropped record).
constexpr double kMaxIrregularFraction = 0.10;
/// Dynamic loops alternate iteration lengths (a branch on for some steps): gaps up to this
/// factor away from the median are another mode of the same period, not a different period.
constexpr double kModeRatio = 1.6;
/// Positions tried after the walked-back iteration start (bounds the detection cost).
constexpr std::size_t kMaxStartShift = 64;
/// Fraction of gaps that must lie within the tolerance of the median.
constexpr double kMinRegularFraction = 0.40;

std::uint64_t GramHash(const std::uint32_t* gram, std::size_t k) {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < k; ++i) {
    hash = (hash ^ gram[i]) * 0x100000001b3ull;
    hash ^= hash >> 29;
  }
  return hash;
}

/// Whether occurrences separated by `gaps` recur once per period; sets the median gap.
/// A gram that recurs once per layer fails: its gap across the rest of the iteration (backward,
/// optimizer) is far longer than kModeRatio times its in-layer gap.
bool EvenlySpaced(std::vector<std::uint64_t> gaps, double tolerance, std::uint64_t* median) {
  if (gaps.empty()) return false;
  std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
  const double mid = double(gaps[gaps.size() / 2]);
  *median = gaps[gaps.size() / 2];
  std::size_t regular = 0, short_gaps = 0, double_gaps = 0;
  for (std::uint64_t gap : gaps) {
    const double g = double(gap);
    if (g >= mid * (1 - tolerance) && g <= mid * (1 + tolerance)) {
      ++regular;
    } else if (g >= mid / kModeRatio && g <= mid * kModeRatio) {
      // another mode of a dynamic loop
    } else if (g < mid) {
      ++short_gaps;
    } else if (g >= mid * (2 - tolerance) && g <= mid * (2 + tolerance)) {
      ++double_gaps;
    } else {
      return false;  // a gap no lost occurrence or loop mode explains: not once per period
    }
  }
  const double n = double(gaps.size());
  return double(regular) >= kMinRegularFraction * n &&
         double(short_gaps) <= kMaxIrregularFraction * n &&
         double(double_gaps) <= kMaxIrregularFraction * n;
}

std::vector<std::uint64_t> Gaps(const std::vector<std::size_t>& positions) {
  std::vector<std::uint64_t> gaps;
  for (std::size_t i = 1; i < positions.size(); ++i)
    gaps.push_back(positions[i] - positions[i - 1]);
  return gaps;
}

struct Candidate {
  std::size_t first;     // first occurrence
  std::uint64_t period;  // median gap
};

/// Evenly spaced n-grams of length k, each with its period.
std::vector<Candidate> FindCandidates(std::span<const std::uint32_t> tokens, std::size_t k,
                                      const BoundaryParams& params) {
  struct Stat {
    std::uint32_t count = 0;
    std::vector<std::size_t> positions;
  };
  std::unordered_map<std::uint64_t, Stat> stats;
  stats.reserve(1024);
  const std::size_t end = tokens.size() - k + 1;
  for (std::size_t i = 0; i < end; ++i) ++stats[GramHash(&tokens[i], k)].count;
  const std::uint32_t min_count = params.min_periods + 2;
  for (std::size_t i = 0; i < end; ++i) {
    Stat& stat = stats[GramHash(&tokens[i], k)];
    if (stat.count >= min_count) stat.positions.push_back(i);
  }
  std::vector<Candidate> candidates;
  for (auto& [hash, stat] : stats) {
    std::uint64_t median = 0;
    if (stat.count < min_count) continue;
    if (!EvenlySpaced(Gaps(stat.positions), params.gap_tolerance, &median)) continue;
    if (median >= params.min_period && median >= k)
      candidates.push_back({stat.positions.front(), median});
  }
  return candidates;
}

/// Periods ordered by how many candidates vote for them (ties: the shorter period first).
std::vector<std::uint64_t> RankPeriods(std::vector<Candidate>& candidates, double tolerance) {
  std::vector<std::uint64_t> sorted;
  sorted.reserve(candidates.size());
  for (const Candidate& c : candidates) sorted.push_back(c.period);
  std::sort(sorted.begin(), sorted.end());
  std::vector<std::pair<std::size_t, std::uint64_t>> votes;  // (votes, period)
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    if (i > 0 && sorted[i] == sorted[i - 1]) continue;
    const double p = double(sorted[i]);
    const auto lo = std::lower_bound(sorted.begin(), sorted.end(), p * (1 - tolerance),
                                     [](std::uint64_t v, double x) { return double(v) < x; });
    const auto hi = std::upper_bound(sorted.begin(), sorted.end(), p * (1 + tolerance),
                                     [](double x, std::uint64_t v) { return x < double(v); });
    votes.emplace_back(static_cast<std::size_t>(hi - lo), sorted[i]);
  }
  std::stable_sort(votes.begin(), votes.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::uint64_t> periods;
  periods.reserve(votes.size());
  for (const auto& v : votes) periods.push_back(v.second);
  return periods;
}

/// Whether `gram` recurs exactly once per `period` from `from` on.
bool OncePerPeriod(std::span<const std::uint32_t> tokens, std::span<const std::uint32_t> gram,
                   std::size_t from, std::uint64_t period, const BoundaryParams& params,
                   std::vector<std::size_t>* occurrences) {
  *occurrences = FindOccurrences(tokens, gram, from);
  if (occurrences->size() < params.min_periods + 2) return false;
  std::uint64_t median = 0;
  if (!EvenlySpaced(Gaps(*occurrences), params.gap_tolerance, &median)) return false;
  return double(median) >= double(period) / kModeRatio &&
         double(median) <= double(period) * kModeRatio;
}

/// Stable comparisons of consecutive segments cut at `cuts`, or 0 when too few are stable.
std::uint32_t Confirm(std::span<const std::uint32_t> tokens, const std::vector<std::size_t>& cuts,
                      const BoundaryParams& params) {
  std::uint32_t stable = 0, compared = 0;
  for (std::size_t i = 2; i < cuts.size(); ++i) {
    const auto previous = tokens.subspan(cuts[i - 2], cuts[i - 1] - cuts[i - 2]);
    const auto current = tokens.subspan(cuts[i - 1], cuts[i] - cuts[i - 1]);
    stable += CompareIterations(previous, current, params.stability).stable;
    ++compared;
  }
  return stable >= params.min_periods && stable * 3 >= compared ? stable : 0;
}

/// Where the iteration containing the anchor at `first` starts: walk back in step over the ops
/// before the anchor and before its next occurrence `next`; the ops repeat until the program's
/// set-up ops before the first iteration. One op inserted or removed on either side is skipped.
std::size_t IterationStart(std::span<const std::uint32_t> tokens, std::size_t first,
                           std::size_t next) {
  std::size_t start = first;
  std::size_t i = first;  // walks back in the first iteration
  std::size_t r = next;   // walks back in the second
  while (i > 0 && r > first + 1 && first - i + 1 < next - first) {
    if (tokens[i - 1] == tokens[r - 1]) {
      start = --i;
      --r;
    } else if (i > 1 && tokens[i - 2] == tokens[r - 1]) {
      --i;  // an op inserted in the first iteration
    } else if (tokens[i - 1] == tokens[r - 2]) {
      --r;  // an op removed from the first iteration
    } else {
      break;
    }
  }
  return start;
}

/// Tries to build a confirmed boundary for `period` from the candidates voting for it.
std::optional<Boundary> TryPeriod(std::span<const std::uint32_t> tokens, std::size_t k,
                                  std::uint64_t period, const std::vector<Candidate>& candidates,
                                  const BoundaryParams& params) {
  const Candidate* earliest = nullptr;
  for (const Candidate& c : candidates) {
    const bool votes = double(c.period) >= double(period) * (1 - params.gap_tolerance) &&
                       double(c.period) <= double(period) * (1 + params.gap_tolerance);
    if (votes && (earliest == nullptr || c.first < earliest->first)) earliest = &c;
  }
  if (earliest == nullptr) return std::nullopt;
  std::vector<std::size_t> occurrences;
  const auto anchor = tokens.subspan(earliest->first, k);
  if (!OncePerPeriod(tokens, anchor, earliest->first, period, params, &occurrences)) {
    return std::nullopt;
  }
  const std::size_t start = IterationStart(tokens, occurrences[0], occurrences[1]);
  Boundary boundary;
  boundary.period = period;
  // The walk may overshoot into the set-up ops by a chance match; move forward to the first
  // position where a short gram recurs exactly once per period.
  const std::size_t last = std::min(earliest->first, start + kMaxStartShift);
  for (std::size_t at = start; at <= last && boundary.signature.empty(); ++at) {
    for (std::size_t n = 1; n <= params.max_gram && at + n <= tokens.size(); ++n) {
      std::vector<std::size_t> cuts;
      if (OncePerPeriod(tokens, tokens.subspan(at, n), at, period, params, &cuts)) {
        boundary.signature.assign(tokens.begin() + at, tokens.begin() + at + n);
        boundary.first = at;
        occurrences = std::move(cuts);
        break;
      }
    }
  }
  if (boundary.signature.empty()) {
    boundary.signature.assign(anchor.begin(), anchor.end());
    boundary.first = earliest->first;
  }
  // The loop must be what the stream is made of, not a stretch of it: a run of identical blocks
  // inside one iteration (ResNet's bottlenecks) is periodic for a while and then ends. Require the
  // periodic part to cover at least half of the window and to last until its end (an occurrence
  // or two near the end may have been lost).
  const std::size_t n = tokens.size();
  if (2 * (n - boundary.first) < n || occurrences.back() + 4 * period < n) return std::nullopt;
  boundary.confirmed = Confirm(tokens, occurrences, params);
  if (boundary.confirmed == 0) return std::nullopt;
  return boundary;
}

}  // namespace

std::vector<std::size_t> FindOccurrences(std::span<const std::uint32_t> tokens,
                                         std::span<const std::uint32_t> gram, std::size_t from) {
  std::vector<std::size_t> positions;
  if (gram.empty() || gram.size() > tokens.size()) return positions;
  const std::size_t end = tokens.size() - gram.size() + 1;
  for (std::size_t i = from; i < end;) {
    if (std::equal(gram.begin(), gram.end(), tokens.begin() + i)) {
      positions.push_back(i);
      i += gram.size();
    } else {
      ++i;
    }
  }
  return positions;
}

std::optional<Boundary> DetectBoundary(std::span<const std::uint32_t> tokens,
                                       const BoundaryParams& params) {
  // Three periods need at least five occurrences of the signature.
  for (std::size_t k = 1; k <= params.max_gram && k * (params.min_periods + 2) <= tokens.size();
       ++k) {
    std::vector<Candidate> candidates = FindCandidates(tokens, k, params);
    if (candidates.empty()) continue;
    const std::vector<std::uint64_t> periods = RankPeriods(candidates, params.gap_tolerance);
    // The best few periods only: a long tail of single-vote periods is noise.
    for (std::size_t i = 0; i < periods.size() && i < 4; ++i) {
      if (auto boundary = TryPeriod(tokens, k, periods[i], candidates, params)) return boundary;
    }
  }
  return std::nullopt;
}

}  // namespace chameleon::daemon
