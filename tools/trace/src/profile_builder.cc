#include "chameleon/trace/profile_builder.h"

#include <unordered_map>

#include "chameleon/trace/reader.h"

namespace chameleon::trace {

policy::Profile BuildProfile(const Trace& trace, const Workload& w, std::size_t step,
                             double iteration_s) {
  const Step& st = w.steps.at(step);
  policy::Profile p;
  p.source = trace.path + " " + st.name;
  p.iteration_s = iteration_s >= 0 ? iteration_s : StepSeconds(w, step);
  // Persistent storages first, then the step's own ones in creation order.
  std::unordered_map<std::uint32_t, std::uint32_t> index;
  for (bool persistent_pass : {true, false}) {
    for (std::uint32_t s = 0; s < w.storages.size(); ++s) {
      const auto& inst = w.storages[s];
      const bool local =
          !inst.persistent && inst.create_op >= st.first_op && inst.create_op < st.end_op;
      if (persistent_pass ? !inst.persistent : !local) continue;
      index.emplace(s, static_cast<std::uint32_t>(p.tensors.size()));
      policy::ProfileTensor t;
      t.external_id = inst.storage_id;
      t.bytes = inst.bytes;
      if (local) {
        t.alloc_op = static_cast<std::int32_t>(inst.create_op - st.first_op);
        t.free_op = static_cast<std::int32_t>(inst.last_use - st.first_op);
      }
      p.tensors.push_back(std::move(t));
    }
  }
  const std::vector<std::uint64_t> live = LiveBytesPerOp(w, step);
  for (std::uint32_t k = st.first_op; k < st.end_op; ++k) {
    const WorkOp& op = w.ops[k];
    policy::ProfileOp out;
    out.token = op.token;
    out.name = trace.nodes[op.node].name;
    out.phase = op.phase;
    out.bytes_live_after = live[k - st.first_op];
    const auto local_k = k - st.first_op;
    for (auto [src, dst] : {std::pair{&op.reads, &out.reads}, std::pair{&op.writes, &out.writes}}) {
      for (std::uint32_t s : *src) {
        const std::uint32_t t = index.at(s);
        dst->push_back(t);
        auto& uses = p.tensors[t].uses;
        if (uses.empty() || uses.back() != local_k) uses.push_back(local_k);
      }
    }
    p.ops.push_back(std::move(out));
  }
  return p;
}

policy::Profile ProfileFromTraceFile(const std::string& path, std::size_t step) {
  const Trace trace = ReadTrace(path);
  const Workload w = BuildWorkload(trace);
  return BuildProfile(trace, w, step == SIZE_MAX ? w.steps.size() - 1 : step);
}

}  // namespace chameleon::trace
