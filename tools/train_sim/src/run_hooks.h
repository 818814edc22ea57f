// Test hooks of the real-arithmetic trainer that let another process steer a run through files
// (docs/trainer.md, "Hooks for multi-process tests"): --stop-file ends the run at the next step
// boundary once the file exists, --grow-file allocates --grow-bytes more device memory once the
// file exists and keeps it to the end. Files, not signals or timers: a test creates them when a
// structured condition holds, and the trainer checks them between steps only, so a step is never
// cut short and the results of the steps it ran stay comparable with an unlimited run of as many.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>
#include <vector>

#include "driver.h"

namespace chameleon::train_sim {

/// Not thread-safe: the training loop calls it between steps.
class RunHooks {
 public:
  RunHooks(const DriverApi& api, std::string stop_file, std::string grow_file,
           std::uint64_t grow_bytes)
      : api_(api),
        stop_file_(std::move(stop_file)),
        grow_file_(std::move(grow_file)),
        grow_bytes_(grow_bytes) {}
  ~RunHooks() { Release(); }
  RunHooks(const RunHooks&) = delete;
  RunHooks& operator=(const RunHooks&) = delete;

  /// True once --stop-file exists: the run ends before step `step`.
  bool StopBefore(int step) const;
  /// Before step `step`: grows once --grow-file exists (and it has not grown yet), printing
  /// `grew <bytes> at step <step>` on stdout. Throws OutOfMemory / DriverError like any
  /// allocation of the trainer.
  void MaybeGrow(int step);
  /// Reads back every grown byte: throws std::runtime_error when one is not what was written (a
  /// runtime that moved the growth lost it).
  void Verify() const;
  /// Frees what MaybeGrow took (the device must be idle).
  void Release();

 private:
  const DriverApi& api_;
  std::string stop_file_, grow_file_;
  std::uint64_t grow_bytes_;
  bool grown_ = false;
  std::vector<CUdeviceptr> pieces_;
};

}  // namespace chameleon::train_sim
