// The training loop and output of the model-shaped mode (--model; format in docs/trainer.md).
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <memory>

#include "allocator.h"
#include "driver.h"
#include "options.h"
#include "sampled_launcher.h"
#include "shaped_model.h"

namespace chameleon::train_sim {

/// Owns the context, stream, allocator and model-shaped network of one run. Not thread-safe.
class ShapedTrainer {
 public:
  ShapedTrainer(const Options& options, const DriverApi& api);
  ~ShapedTrainer();
  ShapedTrainer(const ShapedTrainer&) = delete;
  ShapedTrainer& operator=(const ShapedTrainer&) = delete;

  /// Trains and prints step lines, shift lines, `phases`, `peak`, `persistent`,
  /// `optimizer-state` and `checksum` to stdout. Throws OutOfMemory / DriverError after draining
  /// the device.
  void Run();

 private:
  void Setup();
  void Step(int step);
  void CorruptOneActivationGranule(int step);
  std::uint64_t ChecksumFromDevice();
  void Teardown();
  double Seconds(CUevent from, CUevent to);

  Options options_;
  const DriverApi& api_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  // Step start, end of forward, end of backward, end of optimizer, step end.
  std::array<CUevent, 5> events_{};
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<SampledLauncher> launcher_;
  std::unique_ptr<ShapedModel> model_;
  std::size_t persistent_bytes_ = 0;
  std::uint64_t previous_sequence_ = 0;
  std::array<double, 3> phases_{};  // forward, backward, optimizer of the last step
};

}  // namespace chameleon::train_sim
