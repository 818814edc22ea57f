#include "executor.h"

#include <unistd.h>

#include <algorithm>
#include <vector>

#include "host_pool_cap.h"
#include "log.h"
#include "swap/pointer_scan.h"

namespace chameleon::shim {

std::atomic<Executor*> g_executor{nullptr};

namespace {

// Warm-up (and a run without a daemon, which has no boundaries at all) evicts before or between
// boundary scans. So the allocations that may evict scan too: the 1st, 2nd, 4th, 8th, ... of
// them, so that a table written after an earlier scan is found at a logarithmic cost.
void ScanUnderPressure(Executor& ex, std::uint64_t bytes, CUstream stream) {
  if (!ex.pointer_scan) return;
  const std::uint64_t used =
      ex.engine->chunk_bytes_in_use() + ex.passthrough_live.load(std::memory_order_relaxed);
  if (used + bytes <= ex.engine->device_limit()) return;
  const std::uint64_t n = ex.pressure.fetch_add(1, std::memory_order_relaxed) + 1;
  if ((n & (n - 1)) != 0) return;
  ExecutorPointerScan(ex, stream, /*boundary=*/false);
}

}  // namespace

Executor* CreateExecutor(const ExecutorEnv& env) {
  const Config& c = *env.config;
  if (c.device_limit_bytes == 0 && !env.daemon) return nullptr;
  const DriverAux& aux = env.driver->aux;
  CUdevice dev = 0;
  if (aux.ctx_get_device == nullptr || aux.ctx_get_device(&dev) != CUDA_SUCCESS || dev < 0) {
    Log(LogLevel::kWarn, "swap executor off: no current context at the first allocation");
    return nullptr;
  }
  std::uint64_t limit = c.device_limit_bytes;
  if (limit == 0) {
    size_t total = 0;
    if (aux.device_total_mem == nullptr || aux.device_total_mem(&total, dev) != CUDA_SUCCESS ||
        total == 0) {
      Log(LogLevel::kWarn, "swap executor off: the device's memory size is unknown");
      return nullptr;
    }
    limit = total;
  }
  swap::DriverApi api;
  if (const char* missing = swap::ResolveDriverApi(env.driver->handle, RealDlsym(), &api)) {
    Log(LogLevel::kWarn, "swap executor off: the driver lacks %s", missing);
    return nullptr;
  }
  auto ex = std::make_unique<Executor>();
  ex->device = dev;
  ex->min_bytes = c.swap_min_bytes;
  ex->limit_from_env = c.device_limit_bytes != 0;
  ex->own_limit = limit;
  ex->apply_policy = c.swap_policy;
  swap::SwapEngineOptions o;
  o.device = dev;
  o.chunk_bytes = c.swap_chunk_bytes;
  o.device_limit_bytes = limit;
  topology::HostMemoryOptions host_memory;
  host_memory.topology_path = c.topology_path;
  const HostPoolCap cap = ResolveHostPoolCap(c.host_pool_bytes, host_memory);
  if (!cap.warning.empty()) Log(LogLevel::kWarn, "host pool cap: %s", cap.warning.c_str());
  o.host_pool_cap_bytes = cap.bytes;
  o.external_bytes = &ex->passthrough_live;
  o.eviction =
      c.eviction_closest_size ? swap::EvictionRule::kClosestSize : swap::EvictionRule::kBelady;
  o.placement = c.placement_host ? swap::PlacementMode::kHost : swap::PlacementMode::kAuto;
  ex->record_uses = !c.eviction_closest_size;
  ex->api = api;
  ex->pointer_scan = c.pointer_scan;
  ex->table = env.table;
  ex->ops_disabled = env.ops_disabled;
  ex->active_captures = env.active_captures;
  ex->uplink = env.uplink;
  ex->engine = std::make_unique<swap::SwapEngine>(api, o, &ex->counters);
  if (const CUresult r = ex->engine->Init(); r != CUDA_SUCCESS) {
    Log(LogLevel::kWarn, "swap executor off: initialisation failed (CUresult %d)",
        static_cast<int>(r));
    return nullptr;
  }
  ex->runner = std::make_unique<swap::PolicyRunner>(ex->engine.get(), &ex->counters);
  if (!c.stats_file.empty() && !ex->stats_file.Open(c.stats_file.c_str())) {
    Log(LogLevel::kWarn, "CHAMELEON_STATS_FILE='%s' cannot be opened: no stats file",
        c.stats_file.c_str());
  }
  Log(LogLevel::kInfo,
      "swap executor on: device %d, limit %llu bytes (%s), chunk %zu bytes, host pool cap %llu "
      "(%s), "
      "pass-through below %llu bytes, daemon policy %s",
      static_cast<int>(dev), static_cast<unsigned long long>(limit),
      ex->limit_from_env ? "CHAMELEON_DEVICE_LIMIT" : "device memory", ex->engine->chunk_bytes(),
      static_cast<unsigned long long>(o.host_pool_cap_bytes), cap.source,
      static_cast<unsigned long long>(ex->min_bytes), ex->apply_policy ? "on" : "off");
  return ex.release();  // lives as long as the process, like Runtime
}

void ExecutorForgetAfterFork() {
  // Leaked on purpose: the engine's streams and events belong to the parent's context.
  g_executor.store(nullptr, std::memory_order_relaxed);
}

bool ExecutorPolicySink::SetPolicy(const ipc::Policy& policy) {
  Executor* ex = On();
  if (ex == nullptr) return false;
  // Ignored with CHAMELEON_SWAP_POLICY=off, but its device limit still applies. The daemon's
  // limit lowers ours, never raises it: the operator's, or an owner's lowered by what the daemon
  // lent of its GPU to others (whatever CHAMELEON_DEVICE_LIMIT says: the lessee holds that
  // memory). A higher one than in force gives back what a lower one took; 0: a daemon that sets
  // none, the limit stays.
  if (const std::uint64_t daemon = policy.summary.device_limit_bytes; daemon != 0) {
    const std::uint64_t limit = std::min(ex->own_limit, daemon);
    if (limit != ex->engine->device_limit()) {
      Log(LogLevel::kInfo, "swap executor: device limit %llu bytes from the daemon",
          static_cast<unsigned long long>(limit));
      ex->engine->SetDeviceLimit(limit);
    }
  }
  // The owner side of a lease holds whatever the policy switch: it is about this GPU's memory.
  ex->engine->SetLentBytes(policy.summary.lent_bytes);
  if (ex->apply_policy) ex->runner->SetPolicy(policy);
  return true;
}

std::uint64_t ExecutorPolicySink::DeviceLimit() const {
  const Executor* ex = On();
  return ex != nullptr ? ex->engine->device_limit() : 0;
}

std::uint64_t ExecutorPolicySink::OwnLimit() const {
  const Executor* ex = On();
  return ex != nullptr ? ex->own_limit : 0;
}

void ExecutorPolicySink::PublishCounters(ipc::SegmentHeader* header) const {
  const Executor* ex = On();
  if (ex == nullptr) return;
  ex->counters.PublishTo(header);
  header->executor_device.store(static_cast<std::uint64_t>(ex->device) + 1,
                                std::memory_order_relaxed);
}

bool ExecutorServes(const Executor& ex, std::uint16_t device, std::uint64_t bytes) {
  return bytes >= ex.min_bytes && device == ex.device;
}

CUresult ExecutorAllocate(Executor& ex, CUdeviceptr* dptr, std::uint64_t bytes, CUstream stream,
                          swap::AllocId* id) {
  ScanUnderPressure(ex, bytes, stream);
  return ex.engine->Allocate(bytes, stream, dptr, id, nullptr);
}

void ExecutorAttach(Executor& ex, swap::AllocId id, AllocationState* s,
                    std::uint64_t stream_value) {
  if (s == nullptr) {
    ex.engine->SetPinned(id, true);  // untracked: no launch could ever fault it back in
    return;
  }
  s->last_stream.store(stream_value, std::memory_order_relaxed);
  s->executor_slot.store(reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)),
                         std::memory_order_release);
  ex.engine->AttachFlags(id, &s->flags);
}

bool ExecutorAdmit(Executor& ex, std::uint64_t bytes) {
  ScanUnderPressure(ex, bytes, nullptr);
  return ex.engine->MakeRoom(bytes);
}

void ExecutorPassthrough(Executor& ex, std::uint16_t device, std::uint64_t bytes, bool add) {
  if (device != ex.device) return;
  if (add) {
    ex.passthrough_live.fetch_add(bytes, std::memory_order_relaxed);
  } else {
    ex.passthrough_live.fetch_sub(bytes, std::memory_order_relaxed);
  }
}

bool ExecutorFree(Executor& ex, CUdeviceptr dptr, CUstream stream, CUresult* result,
                  PassthroughFree* passthrough) {
  *passthrough = {};
  const AllocationHit hit = ex.table->Lookup(dptr);
  if (hit.state == nullptr || hit.state->address != dptr) return false;
  const swap::AllocId id = IdOf(hit.state);
  if (id == 0) {
    passthrough->bytes = hit.state->bytes;
    passthrough->device = hit.state->device;
    return false;
  }
  *result = ex.engine->Free(id, stream);
  // Stale ranges are unmapped by a flush once their fence completed; without iteration
  // boundaries (no daemon) nobody else would flush. With boundaries, they flush: an unmap
  // mid-iteration synchronises the device (simgpu; CUDA documents cuMemUnmap as synchronising).
  if ((ex.frees.fetch_add(1, std::memory_order_relaxed) & 63) == 63 &&
      swap::SwapCounters::Get(ex.counters.iterations) == 0) {
    ex.engine->FlushUnmaps();
  }
  return true;
}

void ExecutorMemInfo(Executor& ex, size_t* free_bytes, size_t* total_bytes) {
  const std::uint64_t limit = ex.engine->device_limit();
  const std::uint64_t used =
      ex.engine->chunk_bytes_in_use() + ex.passthrough_live.load(std::memory_order_relaxed);
  if (total_bytes != nullptr) *total_bytes = limit;
  if (free_bytes != nullptr) *free_bytes = limit > used ? limit - used : 0;
}

void ExecutorPin(Executor& ex, std::uint64_t address) {
  const AllocationHit hit = ex.table->Lookup(address);
  if (hit.state == nullptr) return;
  if (const swap::AllocId id = IdOf(hit.state)) {
    ex.engine->FaultIn(id);  // the exported contents must be the real ones, and stay put
    ex.engine->SetPinned(id, true);
  }
}

void ExecutorAfterSync(Executor& ex) { ex.engine->FlushUnmaps(); }

CUresult ExecutorBeforeOpSlow(Executor& ex, CUstream stream, AllocationState* const* states,
                              std::uint32_t n, const ExecOp& op, const OpExtent* extents,
                              std::uint32_t bits) {
  // A named page of the program's VMM: the op may reach the pages after it (program_vmm.h).
  if (__builtin_expect((bits & kProgramVmmPage) != 0, 0)) {
    return ProgramVmmBeforeOp(*ex.engine, stream, states, n, extents);
  }
  if (__builtin_expect((bits & (kSwappedOut | kSwapInFlight)) != 0, 0)) {
    swap::AllocId ids[ipc::kMaxLaunchTensors];
    std::uint32_t m = 0;
    for (std::uint32_t i = 0; i < n && m < ipc::kMaxLaunchTensors; ++i) {
      if (const swap::AllocId id = IdOf(states[i])) ids[m++] = id;
    }
    const CUresult r = ex.engine->PrepareUse(ids, m, stream);
    if (r != CUDA_SUCCESS) {
      Log(LogLevel::kWarn,
          "swap executor: the %u tensors of an op cannot be made resident (CUresult %d): limit "
          "%llu, chunk bytes %llu (in use %llu), passed-through %llu",
          m, static_cast<int>(r), static_cast<unsigned long long>(ex.engine->device_limit()),
          static_cast<unsigned long long>(ex.engine->chunk_bytes_created()),
          static_cast<unsigned long long>(ex.engine->chunk_bytes_in_use()),
          static_cast<unsigned long long>(ex.passthrough_live.load(std::memory_order_relaxed)));
    }
    const auto sv = reinterpret_cast<std::uint64_t>(stream);
    for (std::uint32_t i = 0; i < n; ++i)
      states[i]->last_stream.store(sv, std::memory_order_relaxed);
    return r;
  }
  if (!op.runner) {
    // Warm-up: an OOM eviction must fence the victim on the stream that last used it.
    const auto sv = reinterpret_cast<std::uint64_t>(stream);
    for (std::uint32_t i = 0; i < n; ++i) {
      if (states[i]->last_stream.load(std::memory_order_relaxed) == sv) continue;
      states[i]->last_stream.store(sv, std::memory_order_relaxed);
      if (const swap::AllocId id = IdOf(states[i])) ex.engine->NoteUse(id, stream);
    }
  }
  return CUDA_SUCCESS;
}

void ExecutorAfterOp(Executor& ex, std::uint32_t token, CUstream stream,
                     AllocationState* const* states, std::uint32_t n, const ExecOp& op) {
  if (!op.runner || !ex.runner->HasAfterTrigger(token, op.ticket)) return;
  swap::OpTensor tensors[ipc::kMaxLaunchTensors];
  if (n > ipc::kMaxLaunchTensors) n = ipc::kMaxLaunchTensors;
  for (std::uint32_t i = 0; i < n; ++i) tensors[i] = {IdOf(states[i]), states[i]->bytes};
  ex.runner->AfterOp(token, op.ticket, stream, {tensors, n});
}

void ExecutorPointerScan(Executor& ex, CUstream stream, bool boundary) {
  // No copies or host waits while a graph is being captured anywhere (they would be captured,
  // or be illegal under the global capture mode); a later trigger scans instead.
  if (!ex.pointer_scan || ex.active_captures->load(std::memory_order_relaxed) > 0) return;
  std::lock_guard<std::mutex> lock(ex.scan_mu);
  if (boundary) {
    const std::uint64_t detail = ex.uplink->DetailedIterationsDone();
    if (ex.boundary_scans != 0 && detail == ex.scanned_detail) return;
    ++ex.boundary_scans;
    ex.scanned_detail = detail;
  }
  ex.scans.fetch_add(1, std::memory_order_release);
  std::vector<swap::Range> ranges;
  ex.table->ForEach([&](const AllocationState& s) {
    if (s.device != static_cast<std::uint16_t>(ex.device)) return;
    // A range swapped out or being swapped in is a possible target but must not be read.
    const std::uint32_t f = s.flags.load(std::memory_order_acquire);
    ranges.push_back({s.address, s.bytes, (f & (kSwappedOut | kSwapInFlight)) == 0});
  });
  swap::ScanOptions options;
  options.stream = stream;
  const swap::ScanResult r = swap::ScanPointerTables(ex.api, ranges, options);
  for (const CUdeviceptr target : r.targets) {
    if (const AllocationHit hit = ex.table->Lookup(target); hit.state != nullptr) {
      hit.state->flags.fetch_or(kNeverSwap, std::memory_order_acq_rel);
    }
    ExecutorPin(ex, target);
  }
  ex.uplink->PointerTargetsFound(ex.scans.load(std::memory_order_relaxed), r.targets);
  Log(r.error != CUDA_SUCCESS ? LogLevel::kWarn : LogLevel::kDebug,
      "pointer-table scan %llu: %zu allocations, %llu bytes sampled, %llu unsampled, %zu targets "
      "pinned (CUresult %d)",
      static_cast<unsigned long long>(ex.scans.load(std::memory_order_relaxed)), ranges.size(),
      static_cast<unsigned long long>(r.stats.bytes_copied),
      static_cast<unsigned long long>(r.stats.ranges_unsampled), r.targets.size(),
      static_cast<int>(r.error));
}

bool ExecutorWaitNs(const Executor& ex, std::uint64_t* ns) {
  if (ex.api.event_virtual_ns == nullptr || ex.api.stream_virtual_ns == nullptr) return false;
  *ns = swap::SwapCounters::Get(ex.counters.swap_in_wait_ns) +
        swap::SwapCounters::Get(ex.counters.fault_in_wait_ns) +
        swap::SwapCounters::Get(ex.counters.alloc_wait_ns);
  return true;
}

std::uint64_t ExecutorBoundary(Executor& ex) {
  std::lock_guard<std::mutex> lock(ex.runner_mu);
  // The generation in force during the iteration that ends here (BeginIteration may install
  // the next one).
  const std::uint64_t generation = swap::SwapCounters::Get(ex.counters.policy_generation);
  ex.runner->BeginIteration();
  if (ex.record_uses) {
    const bool paused = ex.uses_paused.load(std::memory_order_relaxed);
    ex.engine->CloseUseIteration(ex.op_position.load(std::memory_order_relaxed), !paused);
    if (paused) ex.counters.Add(ex.counters.use_history_skips);
    ex.op_position.store(0, std::memory_order_relaxed);
    // Recording the uses is for the safety net's evictions. A policy that ran a whole iteration
    // without one, and stays in force, needs none: the next iteration is not recorded, and the
    // eviction rule reads the last recorded one (the same loop). Any eviction, a new generation
    // or no policy: record again.
    const std::uint64_t evictions = swap::SwapCounters::Get(ex.counters.evictions);
    const bool evicted = evictions != ex.evictions_seen;
    ex.evictions_seen = evictions;
    ex.uses_paused.store(ex.runner->active() && ex.runner->generation() == generation &&
                             generation != 0 && !evicted && ex.engine->UsesKnown(),
                         std::memory_order_relaxed);
  }
  if (ex.stats_file.is_open()) {
    ex.stats_file.Write("iteration", ex.counters.Values(), generation, ex.engine->device_limit());
  }
  ex.runner_active.store(ex.runner->active(), std::memory_order_relaxed);
  if (LogEnabled(LogLevel::kDebug)) {
    // For people reading the log; tests and tools read CHAMELEON_STATS_FILE instead.
    Log(LogLevel::kDebug, "executor boundary: generation %llu in force until now, totals:%s",
        static_cast<unsigned long long>(generation),
        FormatCounterPairs(ex.counters.Values()).c_str());
  }
  return ex.runner->generation();
}

}  // namespace chameleon::shim

namespace chameleon::shim {

void ExecutorWriteExitStats() {
  Executor* ex = ExecutorIfOn();
  if (ex == nullptr || !ex->stats_file.is_open()) return;
  std::lock_guard<std::mutex> lock(ex->runner_mu);
  const swap::SwapCounters& c = ex->counters;
  ex->stats_file.Write("exit", c.Values(), swap::SwapCounters::Get(c.policy_generation),
                       ex->engine->device_limit());
}

}  // namespace chameleon::shim
