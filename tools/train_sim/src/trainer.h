// The training loop and its output (format in docs/trainer.md).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "allocator.h"
#include "driver.h"
#include "launcher.h"
#include "model.h"
#include "options.h"
#include "pointer_table.h"
#include "run_hooks.h"

namespace chameleon::train_sim {

/// Owns the context, stream, allocator and model of one run. Not thread-safe.
class Trainer {
 public:
  Trainer(const Options& options, const DriverApi& api);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Trains and prints step lines, shift lines, `peak` and `checksum` to stdout. Throws
  /// OutOfMemory / DriverError after draining the device, so teardown never races a kernel.
  void Run();

 private:
  void Setup();
  void Train();
  void Step(int step);
  void MakeBatch(int step, std::vector<std::int32_t>* tokens,
                 std::vector<std::int32_t>* targets) const;
  void CorruptOneWeightByte(int step);
  std::uint64_t ChecksumFromDevice();
  void Teardown();

  Options options_;
  const DriverApi& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr;
  CUevent end_ = nullptr;
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<Launcher> launcher_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PointerTableGather> gather_;  // --pointer-table
  std::unique_ptr<RunHooks> hooks_;             // --stop-file, --grow-file
  std::size_t persistent_bytes_ = 0;  // weights + Adam state: what must be live between steps
  std::uint64_t previous_sequence_ = 0;
};

}  // namespace chameleon::train_sim
