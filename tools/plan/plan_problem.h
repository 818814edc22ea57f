// A planning instance: the wafer, the model split into pipeline stages, and the slots (groups of
// dies) a stage can be placed on. Built once per run; immutable and thread-safe afterwards.
#pragma once

#include <string>
#include <vector>

#include "chameleon/topology/topology.h"
#include "chameleon/topology/wafer.h"
#include "cost_model.h"
#include "model.h"

namespace chameleon::plan {

struct PlanOptions {
  /// Mixed-precision Adam: bf16 weights (2) + bf16 gradients (2) + fp32 master weights, first
  /// and second moments (12). GPT-175B: 175e9 × 16 = 2.8 TB before activations.
  double bytes_per_param = 16;
  double mfu = 0.5;        ///< achieved fraction of peak FLOP/s (our assumption)
  int dies_per_stage = 0;  ///< tensor-parallel dies per stage; 0 = the most balanced split
};

struct PlanProblem {
  topology::WaferSpec wafer;
  topology::Topology topo;
  ModelSpec model;
  PlanOptions options;
  int stages = 0;
  int dies_per_stage = 0;
  int micro_batches = 0;
  std::vector<std::vector<int>> slot_dies;  ///< slot -> its dies, consecutive in snake order
  std::vector<int> first_layer;             ///< per stage
  std::vector<std::vector<LayerCost>> stage_layers;
  std::vector<double> stage_param_bytes;  ///< weights, gradients, optimizer state
  double message_bytes = 0;               ///< one stage boundary's activations, 2·s·b·h
};

/// Splits the model over the wafer: layers spread evenly (the remainder on the last stages,
/// which hold the fewest micro-batches in flight), embedding on stage 0, output head on the last.
/// Throws std::invalid_argument when the model has fewer layers than stages.
PlanProblem MakeProblem(const topology::WaferSpec& wafer, const ModelSpec& model,
                        const PlanOptions& options);

}  // namespace chameleon::plan
