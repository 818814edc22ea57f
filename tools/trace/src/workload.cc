// Trace -> Workload: which nodes are device-work ops, their phase and step, and the storage
// lifetimes they touch. Rules are documented in docs/replay.md.
#include "chameleon/trace/workload.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "chameleon/trace/op_classes.h"
#include "storage_tracker.h"

namespace chameleon::trace {
namespace {

using policy::Phase;

// Inductor (torch.compile) kernels appear as their own ET nodes, usually without tensors.
bool IsInductorKernel(const std::string& name) { return name.rfind("triton_", 0) == 0; }

bool TouchesCuda(const TraceNode& n) {
  auto cuda = [](const TensorRef& t) { return t.cuda; };
  return std::any_of(n.inputs.begin(), n.inputs.end(), cuda) ||
         std::any_of(n.outputs.begin(), n.outputs.end(), cuda);
}

// A node is a kernel when it touches CUDA tensors, is not a view/metadata op or annotation,
// and no node below it is such a candidate: the deepest op doing device work is counted, so a
// parent like aten::linear never doubles its aten::addmm. Nodes are sorted by id, parents first,
// so one reverse sweep propagates "has a candidate below" upwards.
std::vector<bool> FindKernels(const Trace& trace) {
  const auto& nodes = trace.nodes;
  std::vector<bool> candidate(nodes.size()), below(nodes.size()), kernel(nodes.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    candidate[i] =
        IsInductorKernel(nodes[i].name) ||
        (TouchesCuda(nodes[i]) && !IsMetadataOp(nodes[i].name) && !IsAnnotation(nodes[i].name));
  }
  for (std::size_t i = nodes.size(); i-- > 0;) {
    kernel[i] = candidate[i] && !below[i];
    if (nodes[i].parent >= 0 && (candidate[i] || below[i])) below[nodes[i].parent] = true;
  }
  return kernel;
}

Phase OwnPhase(const std::string& name) {
  auto ends_with = [&](std::string_view s) {
    return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
  };
  if (name == "## forward ##" || ends_with(".forward")) return Phase::kForward;
  if (name == "## backward ##" || name.rfind("autograd::engine::evaluate_function", 0) == 0 ||
      ends_with("Backward0") || ends_with("Backward1") ||
      name.find("reducer::") != std::string::npos) {
    return Phase::kBackward;
  }
  if (name == "## optimizer ##" || name.rfind("Optimizer.", 0) == 0) return Phase::kOptimizer;
  return Phase::kUnknown;
}

// Phase = the innermost marked ancestor's. DDP's reducer hooks (copy_bucket_to_grad, mul_out)
// run on the autograd thread outside any evaluate_function node but are part of backward. A trace
// with no backward marker at all is a forward-only trace, so its unmarked ops are forward.
std::vector<Phase> FindPhases(const Trace& trace) {
  const auto& nodes = trace.nodes;
  std::vector<Phase> phase(nodes.size(), Phase::kUnknown);
  bool has_backward = false;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    Phase own = OwnPhase(nodes[i].name);
    has_backward |= own == Phase::kBackward;
    phase[i] = own != Phase::kUnknown ? own
               : nodes[i].parent >= 0 ? phase[nodes[i].parent]
                                      : Phase::kUnknown;
  }
  if (!has_backward) {
    for (auto& p : phase) {
      if (p == Phase::kUnknown) p = Phase::kForward;
    }
  }
  return phase;
}

// Storages a node creates itself: CUDA outputs not among its inputs and not already created by
// a node below it (the child aten::empty creates what aten::clone returns).
std::vector<std::vector<TensorRef>> FindCreations(const Trace& trace) {
  const auto& nodes = trace.nodes;
  std::vector<std::vector<TensorRef>> own(nodes.size());
  std::vector<std::unordered_set<std::uint64_t>> below(nodes.size());
  for (std::size_t i = nodes.size(); i-- > 0;) {
    const TraceNode& n = nodes[i];
    std::unordered_set<std::uint64_t> inputs;
    for (const auto& t : n.inputs) inputs.insert(t.storage_id);
    std::unordered_set<std::uint64_t> seen;
    for (const auto& t : n.outputs) {
      if (!t.cuda || inputs.count(t.storage_id) || !seen.insert(t.storage_id).second) continue;
      if (below[i].count(t.storage_id) == 0) own[i].push_back(t);
    }
    if (n.parent >= 0) {
      auto& up = below[n.parent];
      up.insert(below[i].begin(), below[i].end());
      for (const auto& t : own[i]) up.insert(t.storage_id);
    }
    below[i].clear();
  }
  return own;
}

std::unordered_set<std::uint64_t> BroadcastTensors(const Trace& trace) {
  std::unordered_set<std::uint64_t> ids;
  for (const auto& n : trace.nodes) {
    if (n.name.find("expand") != std::string::npos ||
        n.name.find("broadcast_to") != std::string::npos) {
      for (const auto& t : n.outputs) ids.insert(t.tensor_id);
    }
  }
  return ids;
}

// Iteration boundaries: ProfilerStep#N nodes; a node belongs to the last step entered before it.
std::vector<std::int64_t> StepStarts(const Trace& trace, std::vector<std::string>* names) {
  std::vector<std::int64_t> starts;
  for (const auto& n : trace.nodes) {
    if (n.name.rfind("ProfilerStep#", 0) == 0) {
      starts.push_back(n.id);
      names->push_back(n.name);
    }
  }
  return starts;
}

// A ProfilerStep#N that encloses no op is not an iteration: the profiler opens the next step just
// before the file is closed, so the last step of a training trace is often empty. Kept, it would
// be replayed as an iteration of ~0 s and halve every average over recent iterations. The kept
// steps are renumbered in order; a trace with no op at all keeps its first step.
void DropEmptySteps(const std::vector<std::string>& names, Workload* w) {
  std::vector<std::uint32_t> ops_in(names.size(), 0);
  for (const WorkOp& op : w->ops) ++ops_in[op.step];
  std::vector<std::uint32_t> renumbered(names.size(), 0);
  for (std::size_t s = 0; s < names.size(); ++s) {
    if (ops_in[s] == 0 && !(w->ops.empty() && s == 0)) continue;
    renumbered[s] = static_cast<std::uint32_t>(w->steps.size());
    w->steps.push_back(Step{names[s], 0, 0});
  }
  for (WorkOp& op : w->ops) op.step = renumbered[op.step];
}

// A tensor-less Inductor kernel writes what its compiled region allocated before it (Inductor
// allocates a region's outputs with aten::empty right before launching) and reads the CUDA
// inputs of its nearest ancestor that has any, else what the previous op wrote.
void InferInductorTensors(const Trace& trace, std::uint32_t i, detail::StorageTracker& tracker,
                          const std::vector<std::uint32_t>& created_log,
                          const std::vector<std::size_t>& log_mark, const std::vector<WorkOp>& ops,
                          WorkOp* op) {
  const auto& nodes = trace.nodes;
  const std::int32_t parent = nodes[i].parent;
  if (parent >= 0) {
    op->writes.assign(created_log.begin() + static_cast<std::ptrdiff_t>(log_mark[parent]),
                      created_log.end());
  }
  for (std::int32_t a = parent; a >= 0; a = nodes[a].parent) {
    for (const auto& t : nodes[a].inputs) {
      if (t.cuda) op->reads.push_back(tracker.Resolve(t));
    }
    if (!op->reads.empty()) return;
  }
  if (!ops.empty()) op->reads = ops.back().writes;
}

}  // namespace

namespace detail {
void FinishStorages(Workload* w, std::vector<StorageInstance> instances);
}

Workload BuildWorkload(const Trace& trace) {
  const auto& nodes = trace.nodes;
  const std::vector<bool> kernel = FindKernels(trace);
  const std::vector<Phase> phase = FindPhases(trace);
  const auto creations = FindCreations(trace);
  std::vector<std::string> step_names;
  const std::vector<std::int64_t> step_starts = StepStarts(trace, &step_names);

  Workload w;
  detail::StorageTracker tracker(BroadcastTensors(trace));
  std::unordered_map<std::string, std::uint32_t> tokens;
  std::vector<bool> done(nodes.size());
  std::vector<std::uint32_t> stack;

  std::vector<std::uint32_t> created_log;           // instances in creation order
  std::vector<std::size_t> log_mark(nodes.size());  // created_log size when the node was entered
  auto create = [&](std::uint32_t i) {
    done[i] = true;
    log_mark[i] = created_log.size();
    for (const auto& t : creations[i]) {
      created_log.push_back(tracker.Create(t, static_cast<std::int64_t>(w.ops.size())));
    }
  };
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    if (done[i]) continue;
    if (!kernel[i]) {
      create(i);
      continue;
    }
    // Everything below a kernel (its empty outputs, views) happens before the kernel runs.
    stack.assign(nodes[i].children.begin(), nodes[i].children.end());
    while (!stack.empty()) {
      const std::uint32_t c = stack.back();
      stack.pop_back();
      create(c);
      stack.insert(stack.end(), nodes[c].children.begin(), nodes[c].children.end());
    }
    create(i);
    WorkOp op;
    op.node = i;
    auto [tok, fresh] = tokens.emplace(nodes[i].name, static_cast<std::uint32_t>(w.names.size()));
    if (fresh) w.names.push_back(nodes[i].name);
    op.token = tok->second;
    const auto step = std::upper_bound(step_starts.begin(), step_starts.end(), nodes[i].id);
    op.step = step == step_starts.begin()
                  ? 0
                  : static_cast<std::uint32_t>(step - step_starts.begin() - 1);
    const bool collective_parent =
        nodes[i].parent >= 0 && IsCollectiveOp(nodes[nodes[i].parent].name);
    op.kind =
        IsCollectiveOp(nodes[i].name) || collective_parent ? OpKind::kCollective : OpKind::kCompute;
    op.phase = phase[i];
    if (!TouchesCuda(nodes[i])) {
      InferInductorTensors(trace, i, tracker, created_log, log_mark, w.ops, &op);
    }
    for (const auto& t : nodes[i].inputs) {
      if (t.cuda) op.reads.push_back(tracker.Resolve(t));
      if (t.cuda) op.tensor_bytes += t.numel * t.elem_size;
    }
    for (const auto& t : nodes[i].outputs) {
      if (t.cuda) op.writes.push_back(tracker.Resolve(t));
      if (t.cuda) op.tensor_bytes += t.numel * t.elem_size;
    }
    w.ops.push_back(std::move(op));
  }
  if (step_names.empty()) step_names.push_back("whole trace");
  DropEmptySteps(step_names, &w);
  detail::FinishStorages(&w, tracker.Take());
  return w;
}

}  // namespace chameleon::trace
