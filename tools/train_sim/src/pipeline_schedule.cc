#include "pipeline_schedule.h"

#include <algorithm>

namespace chameleon::train_sim {

std::vector<PipelineAction> OneForwardOneBackward(int stages, int stage, int micro_batches) {
  std::vector<PipelineAction> actions;
  const int warmup = std::min(stages - 1 - stage, micro_batches);
  int forwards = 0, backwards = 0;
  while (forwards < warmup) actions.push_back({true, forwards++});
  while (forwards < micro_batches) {
    actions.push_back({true, forwards++});
    actions.push_back({false, backwards++});
  }
  while (backwards < micro_batches) actions.push_back({false, backwards++});
  return actions;
}

LayerRange StageLayers(int layers, int stages, int stage) {
  const int base = layers / stages, extra = layers % stages;
  const int first = stage * base + std::min(stage, extra);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

}  // namespace chameleon::train_sim
