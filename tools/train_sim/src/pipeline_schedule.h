// The 1F1B pipeline schedule (PipeDream-Flush, as Megatron-LM runs it) and the contiguous layer
// split of chameleon-train-sim --pipeline (docs/trainer.md, "Pipeline parallelism").
#pragma once

#include <vector>

namespace chameleon::train_sim {

/// One step of one stage's schedule: the forward or the backward of one micro-batch.
struct PipelineAction {
  bool forward = true;
  int micro_batch = 0;
  bool operator==(const PipelineAction&) const = default;
};

/// Stage `stage` of `stages`, `micro_batches` per step: a warm-up of min(stages - 1 - stage,
/// micro_batches) forwards, then one forward and one backward alternately until every forward
/// is issued, then the remaining backwards (cool-down). Backwards run in micro-batch order on
/// every stage, so weight gradients accumulate in the same order whatever `stages` is. Pure.
std::vector<PipelineAction> OneForwardOneBackward(int stages, int stage, int micro_batches);

/// Layers [first, end) of stage `stage`: a contiguous split, the first `layers % stages` stages
/// one layer longer. Pure.
struct LayerRange {
  int first = 0;
  int end = 0;
};
LayerRange StageLayers(int layers, int stages, int stage);

}  // namespace chameleon::train_sim
