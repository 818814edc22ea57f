// chameleon-train-sim --pipeline N --micro-batches M (docs/trainer.md, "Pipeline parallelism"):
// the model-shaped network split into N contiguous stages on N devices, trained with the 1F1B
// schedule, activations and their gradients moved between stages by peer copies.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "allocator.h"
#include "driver.h"
#include "options.h"
#include "pipeline_schedule.h"
#include "pipeline_stage.h"

namespace chameleon::train_sim {

/// Drives every stage from one host thread, issuing each stage's schedule as far as the
/// neighbours' issued work allows (the streams run concurrently; events order them). Not
/// thread-safe.
class PipelineTrainer {
 public:
  PipelineTrainer(const Options& options, const DriverApi& api);
  ~PipelineTrainer();
  PipelineTrainer(const PipelineTrainer&) = delete;
  PipelineTrainer& operator=(const PipelineTrainer&) = delete;

  /// Trains and prints step lines, `peak`, `device <i> peak`, `persistent`,
  /// `device <i> persistent`, `optimizer-state`, `device <i> busy` and `checksum`. Throws
  /// OutOfMemory (naming the device) / DriverError.
  void Run();

 private:
  /// The host-side data of one micro-batch: its tokens and targets (alive until the step is
  /// synchronised, as the copies read them) and the digest copied back.
  struct MicroBatch {
    std::vector<std::int32_t> tokens, targets;
    Tensor t_tokens, t_targets, loss;
    std::uint64_t digest = 0;
    // Per stage: the tensor it sent forward (its output) / backward (its input's gradient) and
    // the mark recorded after producing it.
    std::vector<Tensor> out, grad;
    std::vector<PipelineStage::Mark> out_ready, grad_ready;
    std::vector<bool> forward_done, backward_done;
  };

  void Setup();
  void Step(int step);
  void Upload();
  void Download();
  bool Ready(int stage, const PipelineAction& a) const;
  void Forward(int stage, MicroBatch& mb, int sample);
  void Backward(int stage, MicroBatch& mb, int sample);
  std::uint64_t ChecksumFromDevice();
  std::uint64_t Issue() { return ++issued_; }

  Options options_;
  const DriverApi& api_;
  LiveTotal total_;
  std::vector<std::unique_ptr<PipelineStage>> stages_;
  std::vector<std::vector<PipelineAction>> schedules_;
  std::vector<MicroBatch> micro_;
  std::vector<std::size_t> persistent_;
  // Per stage: marks around each compute span of the step (after its waits and copies in),
  // and the summed span of the last step: the stage's busy time (`device <i> busy`).
  std::vector<std::vector<std::pair<PipelineStage::Mark, PipelineStage::Mark>>> spans_;
  std::vector<double> busy_s_;
  std::uint64_t issued_ = 0;
};

}  // namespace chameleon::train_sim
