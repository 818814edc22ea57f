#include "plan_problem.h"

#include <stdexcept>

namespace chameleon::plan {
namespace {

// Boustrophedon order: consecutive dies are always neighbours, so a slot is a connected chain.
std::vector<int> SnakeOrder(const topology::WaferSpec& w) {
  std::vector<int> order;
  for (int y = 0; y < w.height; ++y) {
    for (int i = 0; i < w.width; ++i) {
      order.push_back(topology::DieIndex(w, y % 2 == 0 ? i : w.width - 1 - i, y));
    }
  }
  return order;
}

int ChooseDiesPerStage(int dies, int layers, int requested) {
  if (requested > 0) {
    if (dies % requested != 0) {
      throw std::invalid_argument("dies per stage must divide the " + std::to_string(dies) +
                                  " dies");
    }
    return requested;
  }
  // The pipeline is paced by its fullest stage: ceil(layers / stages) layers on dies / stages
  // dies. Minimise ceil(layers / stages) × stages (the layer slots the slowest stage forces on
  // every stage); on a tie keep more stages (less tensor-parallel traffic).
  int best = dies;
  long best_slots = -1;
  for (int k = 1; k <= dies; ++k) {
    const int stages = dies / k;
    if (dies % k != 0 || stages > layers) continue;
    const long slots = static_cast<long>((layers + stages - 1) / stages) * stages;
    if (best_slots < 0 || slots < best_slots) best = k, best_slots = slots;
  }
  return best;
}

}  // namespace

PlanProblem MakeProblem(const topology::WaferSpec& wafer, const ModelSpec& model,
                        const PlanOptions& options) {
  PlanProblem p;
  p.wafer = wafer;
  p.topo = topology::BuildWafer(wafer);
  p.model = model;
  p.options = options;
  p.dies_per_stage = ChooseDiesPerStage(wafer.dies(), model.layers, options.dies_per_stage);
  p.stages = wafer.dies() / p.dies_per_stage;
  if (model.layers < p.stages) {
    throw std::invalid_argument("model has " + std::to_string(model.layers) + " layers, fewer " +
                                "than the " + std::to_string(p.stages) + " stages");
  }
  p.micro_batches = model.micro_batches > 0 ? model.micro_batches : 4 * p.stages;
  const std::vector<int> snake = SnakeOrder(wafer);
  for (int s = 0; s < p.stages; ++s) {
    p.slot_dies.emplace_back(snake.begin() + s * p.dies_per_stage,
                             snake.begin() + (s + 1) * p.dies_per_stage);
  }
  const int base = model.layers / p.stages;
  const int extra = model.layers % p.stages;
  int layer = 0;
  for (int s = 0; s < p.stages; ++s) {
    const int count = base + (s >= p.stages - extra ? 1 : 0);
    p.first_layer.push_back(layer);
    p.stage_layers.emplace_back();
    double params = 0;
    for (int i = 0; i < count; ++i, ++layer) {
      p.stage_layers.back().push_back(CostOfLayer(model, layer));
      params += p.stage_layers.back().back().params;
    }
    if (s == 0) params += static_cast<double>(model.vocab) * model.hidden;
    if (s == p.stages - 1) params += static_cast<double>(model.vocab) * model.hidden;
    p.stage_param_bytes.push_back(params * options.bytes_per_param);
  }
  p.message_bytes = 2.0 * model.seq * model.micro_batch * model.hidden;
  return p;
}

}  // namespace chameleon::plan
