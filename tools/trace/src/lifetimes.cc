// Storage lifetimes after the walk: uses, persistence, step ranges and live bytes.
#include <algorithm>

#include "chameleon/trace/workload.h"

namespace chameleon::trace {
namespace detail {

namespace {

void SortUnique(std::vector<std::uint32_t>* v) {
  std::sort(v->begin(), v->end());
  v->erase(std::unique(v->begin(), v->end()), v->end());
}

}  // namespace

// Drops instances no op touches (an empty tensor that was only viewed never needs memory),
// renumbers the rest, and marks as persistent those that exist before the trace or outlive
// the step that created them: replay allocates those once and keeps them.
void FinishStorages(Workload* w, std::vector<StorageInstance> instances) {
  for (std::size_t k = 0; k < w->ops.size(); ++k) {
    WorkOp& op = w->ops[k];
    SortUnique(&op.reads);
    SortUnique(&op.writes);
    for (auto list : {&op.reads, &op.writes}) {
      for (std::uint32_t s : *list) {
        auto& inst = instances[s];
        if (inst.first_use < 0) inst.first_use = static_cast<std::int64_t>(k);
        inst.last_use = static_cast<std::int64_t>(k);
      }
    }
  }
  std::vector<std::uint32_t> remap(instances.size(), UINT32_MAX);
  for (std::size_t s = 0; s < instances.size(); ++s) {
    StorageInstance& inst = instances[s];
    if (inst.first_use < 0) continue;
    inst.persistent =
        inst.create_op < 0 || w->ops[inst.create_op].step != w->ops[inst.last_use].step;
    remap[s] = static_cast<std::uint32_t>(w->storages.size());
    w->storages.push_back(inst);
  }
  for (auto& op : w->ops) {
    for (auto& s : op.reads) s = remap[s];
    for (auto& s : op.writes) s = remap[s];
  }
  for (auto& step : w->steps) step.first_op = step.end_op = 0;
  for (std::size_t k = 0; k < w->ops.size(); ++k) {
    Step& step = w->steps[w->ops[k].step];
    if (step.end_op == 0) step.first_op = static_cast<std::uint32_t>(k);
    step.end_op = static_cast<std::uint32_t>(k + 1);
  }
}

}  // namespace detail

std::vector<std::uint64_t> LiveBytesPerOp(const Workload& w, std::size_t step) {
  const Step& st = w.steps.at(step);
  const std::size_t n = st.end_op - st.first_op;
  // Difference array: +bytes at allocation, -bytes after the last use.
  std::vector<std::int64_t> delta(n + 1, 0);
  std::uint64_t base = 0;
  for (const auto& inst : w.storages) {
    if (inst.persistent) {
      base += inst.bytes;
      continue;
    }
    if (inst.last_use < st.first_op || inst.create_op >= st.end_op) continue;
    delta[inst.create_op - st.first_op] += static_cast<std::int64_t>(inst.bytes);
    delta[inst.last_use - st.first_op + 1] -= static_cast<std::int64_t>(inst.bytes);
  }
  std::vector<std::uint64_t> live(n);
  std::int64_t cur = 0;
  for (std::size_t k = 0; k < n; ++k) {
    cur += delta[k];
    live[k] = base + static_cast<std::uint64_t>(cur);
  }
  return live;
}

std::uint64_t PeakBytes(const Workload& w) {
  std::uint64_t peak = 0;
  for (std::size_t s = 0; s < w.steps.size(); ++s) {
    for (std::uint64_t b : LiveBytesPerOp(w, s)) peak = std::max(peak, b);
  }
  return peak;
}

double OpSeconds(const WorkOp& op) {
  if (op.duration_ns >= 0) return static_cast<double>(op.duration_ns) * 1e-9;
  return kModelLaunchS + static_cast<double>(op.tensor_bytes) / kModelHbmBytesPerS;
}

double StepSeconds(const Workload& w, std::size_t step) {
  const Step& st = w.steps.at(step);
  double total = 0;
  for (std::uint32_t k = st.first_op; k < st.end_op; ++k) total += OpSeconds(w.ops[k]);
  return total;
}

}  // namespace chameleon::trace
