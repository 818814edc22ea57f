// ProgramVmmBeforeOp: the op-path half of program VMM (program_vmm.h).
#include <algorithm>
#include <utility>
#include <vector>

#include "log.h"
#include "program_vmm.h"
#include "program_vmm_registry.h"

namespace chameleon::shim {

using namespace program_vmm;

CUresult ProgramVmmBeforeOp(swap::SwapEngine& engine, CUstream stream,
                            AllocationState* const* states, std::uint32_t n,
                            const OpExtent* extents) {
  // Per thread, grown once: no allocation in steady state.
  thread_local std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  thread_local std::vector<AllocationState*> touched;
  ranges.clear();
  touched.clear();
  for (std::uint32_t i = 0; i < n; ++i) {
    AllocationState* s = states[i];
    if ((s->flags.load(std::memory_order_acquire) & kProgramVmmPage) == 0 || FirstPageOnly()) {
      touched.push_back(s);
    } else if (extents != nullptr) {
      ranges.emplace_back(extents[i].address,
                          extents[i].address + std::max<std::uint64_t>(extents[i].bytes, 1));
    } else {
      ranges.emplace_back(s->address, UINT64_MAX);  // to the end of the contiguous run
    }
  }
  std::sort(ranges.begin(), ranges.end());
  Registry& reg = Reg();
  std::lock_guard lock(reg.mu);
  // One walk over each stretch: ranges sorted by start; `done` is where the last walk stopped
  // (contiguous from its start), so overlapping ranges continue from there.
  CUdeviceptr done = 0;
  for (const auto& [lo, hi] : ranges) {
    if (hi <= done) continue;
    auto it = Containing(reg, std::max<CUdeviceptr>(lo, done));
    if (it == reg.maps.end()) continue;
    CUdeviceptr at = it->first;
    for (; it != reg.maps.end() && it->first == at && at < hi; ++it) {
      at = it->first + it->second.bytes;
      if (it->second.state != nullptr) touched.push_back(it->second.state);
    }
    done = at;
  }
  std::uint32_t bits = 0;
  for (const AllocationState* s : touched) bits |= s->flags.load(std::memory_order_acquire);
  for (std::uint32_t i = 0; i < n; ++i) bits |= states[i]->flags.load(std::memory_order_acquire);
  const auto sv = reinterpret_cast<std::uint64_t>(stream);
  CUresult r = CUDA_SUCCESS;
  if ((bits & (kSwappedOut | kSwapInFlight)) != 0) {
    // The named tensors must be on the device; the pages they may reach must be readable:
    // resident, or (if they do not fit) mapped to host memory by the engine.
    thread_local std::vector<swap::AllocId> named, reach;
    named.clear();
    reach.clear();
    for (std::uint32_t i = 0; i < n; ++i) {
      if (const swap::AllocId id = IdOf(states[i])) named.push_back(id);
    }
    for (const AllocationState* s : touched) {
      const swap::AllocId id = IdOf(s);
      if (id != 0 && std::find(named.begin(), named.end(), id) == named.end()) reach.push_back(id);
    }
    r = engine.PrepareSpan(named.data(), named.size(), reach.data(), reach.size(), stream);
    if (r != CUDA_SUCCESS) {
      Log(LogLevel::kWarn,
          "program VMM: an op's %zu tensors and %zu reachable pages cannot be made accessible "
          "(CUresult %d, limit %llu)",
          named.size(), reach.size(), static_cast<int>(r),
          static_cast<unsigned long long>(engine.device_limit()));
    }
    for (AllocationState* s : touched) s->last_stream.store(sv, std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i)
      states[i]->last_stream.store(sv, std::memory_order_relaxed);
    return r;
  }
  for (AllocationState* s : touched) {
    if (s->last_stream.load(std::memory_order_relaxed) == sv) continue;
    s->last_stream.store(sv, std::memory_order_relaxed);
    if (const swap::AllocId id = IdOf(s)) engine.NoteUse(id, stream);
  }
  return r;
}

}  // namespace chameleon::shim
