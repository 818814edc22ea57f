// OpTimer: the device time of each op of a detailed iteration, for the policy's time grid.
//
// Why: the planner needs to know which ops can hide a swap. With only the iteration timed it gave
// every op the same share, and on GPT-2 XL counted on ~36 ms of optimizer compute to hide the
// last swap-ins where there were ~12 ms (docs/policy.md, "Limits"). Here, during the one detailed
// iteration the daemon asks for, each op gets a CUDA event on its stream before it (after the
// swap executor's waits, so a swap-in's wait is not the op's time) and one after it; when the
// iteration ends, the thread that saw its boundary waits for the last events once and reports
// each op's elapsed time (kOpTimes, docs/protocol.md). Outside a detailed iteration an op pays
// one relaxed load (armed()).
//
// Thread-safety: every method may be called from any thread; the slots are guarded by a mutex
// that only detailed iterations take (never in steady state).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <vector>

#include "chameleon/ipc/event_records.h"
#include "real_driver.h"

namespace chameleon::shim {

class OpTimer {
 public:
  /// Ops timed per detailed iteration at most (two events each, kept for reuse).
  static constexpr std::size_t kMaxOps = 1u << 16;
  /// Stop()'s ordinal for an op whose record was not pushed as a detailed op.
  static constexpr std::uint32_t kNotDetailed = UINT32_MAX;

  /// Without the event functions (or no call) nothing is ever timed.
  void Configure(const DriverAux* aux);

  /// Under the telemetry's ring lock: a detailed iteration starts (its ops are timed) / ends
  /// (its slots wait for Collect; ops started before and stopped after still land in them).
  void Open();
  void Close();
  bool armed() const { return armed_.load(std::memory_order_relaxed); }

  /// Before the op is forwarded: an event on `stream`. Returns a handle for Stop (0: not timed).
  std::uint64_t Start(CUstream stream);
  /// After the op's record was pushed as detailed op `ordinal` (kNotDetailed: it was not, and
  /// the start is forgotten): the closing event on `stream`.
  void Stop(std::uint64_t handle, std::uint32_t ordinal, CUstream stream);
  /// After the closed iteration's last op: waits for its events (once the device ran them, this
  /// returns at once) and returns the timed ops in ordinal order. Frees the slots.
  std::vector<ipc::OpTime> Collect();

  /// Fork child: the parent's events are not the child's (and the mutex may have been held).
  void ResetForChild();

 private:
  struct Slot {
    CUevent start = nullptr;
    CUevent stop = nullptr;
    std::uint32_t ordinal = kNotDetailed;
  };
  struct Batch {
    std::uint32_t epoch = 0;
    std::vector<Slot> slots;
  };
  Batch* BatchOf(std::uint32_t epoch);
  CUevent TakeEvent();

  const DriverAux* aux_ = nullptr;
  std::atomic<bool> armed_{false};
  std::mutex mu_;
  // --- guarded by mu_ ---
  std::uint32_t next_epoch_ = 1;
  Batch open_;    // the detailed iteration in progress (epoch 0: none)
  Batch closed_;  // the one that ended, until Collect
  std::vector<CUevent> free_events_;
};

}  // namespace chameleon::shim
