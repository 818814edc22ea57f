#include "executor_replay.h"

#include <algorithm>
#include <deque>
#include <utility>

#include "chameleon/policy/memory.h"

namespace chameleon::policy::detail {
namespace {

// Replayed iterations; the last one is reported. One is enough for the pool and the streams to
// reach their steady state on the traces and models tried (the second and third agree to the
// nanosecond); the first carries the start-up (an empty pool, idle streams).
constexpr std::uint32_t kIterations = 3;

// Freed device bytes, oldest first (ChunkPool hands out pooled chunks in the order they came
// back), each piece with the time its last user is done on the device.
class FreedBytes {
 public:
  void Give(double ready_s, std::uint64_t bytes) {
    if (bytes > 0) pieces_.push_back({ready_s, bytes});
  }
  // Takes `bytes`; returns when the last piece taken is free (0 for fresh memory, created when
  // nothing freed is left: the plan fits the limit, so creating is always allowed here).
  double Take(std::uint64_t bytes) {
    double ready = 0;
    while (bytes > 0 && !pieces_.empty()) {
      Piece& front = pieces_.front();
      const std::uint64_t used = std::min(front.bytes, bytes);
      ready = std::max(ready, front.ready_s);
      bytes -= used;
      front.bytes -= used;
      if (front.bytes == 0) pieces_.pop_front();
    }
    return ready;
  }

 private:
  struct Piece {
    double ready_s;
    std::uint64_t bytes;
  };
  std::deque<Piece> pieces_;
};

std::uint64_t DeviceBytesOf(const PlannedSwap& s) {
  return s.device_bytes != 0 ? s.device_bytes : s.bytes;
}

}  // namespace

ReplayedIteration ReplayOnExecutor(const Profile& profile, const std::vector<PlannedSwap>& swaps,
                                   const GeneratorOptions& options,
                                   const std::vector<double>& op_s) {
  ReplayedIteration result;
  for (const double s : op_s) result.iteration_s += s;
  const auto ops = static_cast<std::uint32_t>(profile.ops.size());
  if (ops == 0 || op_s.size() != ops) return result;
  const double out_bw = OutBandwidth(options);
  const double in_bw = InBandwidth(options);

  // Pooled memory per op: what the executor serves through its chunks (swappable tensors of at
  // least min_swap_bytes, rounded); the rest passes through and never waits for a copy.
  std::vector<std::uint64_t> alloc_before(ops, 0), free_after(ops, 0);
  for (const ProfileTensor& t : profile.tensors) {
    if (!t.swappable || t.bytes < options.min_swap_bytes) continue;
    const std::uint64_t bytes = DeviceBytes(t, options.chunk_bytes, options.min_swap_bytes);
    if (t.alloc_op >= 0) alloc_before[static_cast<std::uint32_t>(t.alloc_op)] += bytes;
    if (t.free_op >= 0) free_after[static_cast<std::uint32_t>(t.free_op)] += bytes;
  }
  // Swaps by the op their events fall on.
  std::vector<std::vector<std::uint32_t>> out_at(ops), in_at(ops), use_at(ops);
  for (std::uint32_t k = 0; k < swaps.size(); ++k) {
    out_at[swaps[k].out_after_op % ops].push_back(k);
    in_at[swaps[k].in_start_op % ops].push_back(k);
    use_at[swaps[k].use_op % ops].push_back(k);
  }
  for (std::vector<std::uint32_t>& at : in_at) {
    // Issued at one op onto one in-stream: the nearest use first (OrderSwapInsByUse's order).
    const auto distance = [&](std::uint32_t k) { return swaps[k].use_op - swaps[k].in_start_op; };
    std::sort(at.begin(), at.end(), [&](std::uint32_t a, std::uint32_t b) {
      return std::make_pair(distance(a), a) < std::make_pair(distance(b), b);
    });
  }

  // Instance (k, i) is swap k's gap that starts with the swap-out of iteration i; i = -1 stands
  // for the gaps already open when the replay starts (those that cross the boundary).
  const std::size_t slots = kIterations + 1;
  const auto slot = [&](std::uint32_t k, std::int64_t iteration) {
    return static_cast<std::size_t>(k) * slots + static_cast<std::size_t>(iteration + 1);
  };
  std::vector<char> out_done(swaps.size() * slots, 0);
  std::vector<double> ready(swaps.size() * slots, -1);  // < 0: nothing to wait for
  for (std::uint32_t k = 0; k < swaps.size(); ++k) {
    if (swaps[k].in_start_op >= ops) out_done[slot(k, -1)] = 1;
  }

  FreedBytes freed;
  double now = 0, out_free = 0, in_free = 0;
  for (std::uint32_t it = 0; it < kIterations; ++it) {
    const double start = now;
    double in_wait = 0, out_wait = 0;
    for (std::uint32_t op = 0; op < ops; ++op) {
      // The op's allocations come before its launch, and with it the swap-in triggers.
      const double memory = freed.Take(alloc_before[op]);
      if (memory > now) out_wait += memory - now, now = memory;
      for (const std::uint32_t k : in_at[op]) {
        const std::int64_t gap = static_cast<std::int64_t>(it) - swaps[k].in_start_op / ops;
        if (gap < -1 || !out_done[slot(k, gap)]) continue;  // resident: nothing to bring back
        const double pieces = freed.Take(DeviceBytesOf(swaps[k]));
        in_free = std::max({in_free, now, pieces}) + static_cast<double>(swaps[k].bytes) / in_bw;
        ready[slot(k, gap)] = in_free;
      }
      for (const std::uint32_t k : use_at[op]) {
        const std::int64_t gap = static_cast<std::int64_t>(it) - swaps[k].use_op / ops;
        if (gap < -1) continue;
        double& r = ready[slot(k, gap)];
        if (r > now) in_wait += r - now, now = r;
        r = -1;
      }
      now += op_s[op];
      for (const std::uint32_t k : out_at[op]) {
        out_free = std::max(out_free, now) + static_cast<double>(swaps[k].bytes) / out_bw;
        freed.Give(out_free, DeviceBytesOf(swaps[k]));
        out_done[slot(k, it)] = 1;
      }
      freed.Give(now, free_after[op]);
    }
    result = {now - start, in_wait, out_wait};
  }
  return result;
}

}  // namespace chameleon::policy::detail
