#include "replayer.h"

#include <cinttypes>
#include <cstdio>

#include "kernels.h"

namespace chameleon::replay {
namespace {

// Cost-model bytes of an op: its tensors' bytes (the driver applies its own bandwidth), or for a
// recorded duration d the bytes that make the driver's kernel time d (see Calibrate).
float CostBytes(const trace::WorkOp& op, double latency_ns, double bytes_per_ns) {
  if (op.duration_ns < 0) return static_cast<float>(op.tensor_bytes);
  return static_cast<float>(std::max(0.0, static_cast<double>(op.duration_ns) - latency_ns) *
                            bytes_per_ns);
}

std::uint64_t SeedOf(const trace::StorageInstance& s, std::uint32_t index) {
  return s.storage_id * 0x100000001b3ull ^ index;
}

}  // namespace

Replayer::Replayer(const ReplayOptions& options, const trace::Trace& trace,
                   const trace::Workload& workload)
    : options_(options), trace_(trace), w_(workload), ptr_(workload.storages.size(), 0) {}

Replayer::~Replayer() {
  // Best effort: the process is about to exit; errors here would hide the real one.
  if (stream_ != nullptr) api_.cuStreamSynchronize(stream_);
  for (std::size_t s = 0; s < ptr_.size(); ++s) {
    if (ptr_[s] != 0 && alloc_) alloc_->Free(ptr_[s], w_.storages[s].bytes);
  }
  if (alloc_) {
    api_.cuStreamSynchronize(stream_);
    alloc_->ReleaseAll();
  }
  if (digest_ != 0) api_.cuMemFree(digest_);
  if (module_ != nullptr) api_.cuModuleUnload(module_);
  if (start_ != nullptr) api_.cuEventDestroy(start_);
  if (end_ != nullptr) api_.cuEventDestroy(end_);
  if (stream_ != nullptr) api_.cuStreamDestroy(stream_);
  if (ctx_ != nullptr) api_.cuDevicePrimaryCtxRelease(device_);
}

void Replayer::Setup() {
  api_ = LoadDriver();
  Check(api_, api_.cuInit(0), "cuInit");
  Check(api_, api_.cuDeviceGet(&device_, 0), "cuDeviceGet");
  Check(api_, api_.cuDevicePrimaryCtxRetain(&ctx_, device_), "cuDevicePrimaryCtxRetain");
  Check(api_, api_.cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
  Check(api_, api_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  Check(api_, api_.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
  Check(api_, api_.cuEventCreate(&end_, CU_EVENT_DEFAULT), "cuEventCreate");
  image_ = std::make_unique<ReplayModule>(w_.names);
  Check(api_, api_.cuModuleLoadData(&module_, &image_->image()), "cuModuleLoadData");
  Check(api_, api_.cuModuleGetFunction(&probe_fn_, module_, kProbeKernel),
        "cuModuleGetFunction(replay_probe)");
  Check(api_, api_.cuModuleGetFunction(&init_fn_, module_, kInitKernel),
        "cuModuleGetFunction(replay_init)");
  Check(api_, api_.cuModuleGetFunction(&digest_fn_, module_, kDigestKernel),
        "cuModuleGetFunction(replay_digest)");
  for (const std::string& name : w_.names) {
    CUfunction f = nullptr;
    Check(api_, api_.cuModuleGetFunction(&f, module_, name.c_str()),
          "cuModuleGetFunction(" + name + ")");
    op_fns_.push_back(f);
  }
  Check(api_, api_.cuMemAlloc(&digest_, 8), "cuMemAlloc(digest)");
  const std::uint64_t zero = 0;
  Check(api_, api_.cuMemcpyHtoD(digest_, &zero, 8), "cuMemcpyHtoD(digest)");
  alloc_ = MakeAllocator(options_.alloc, api_, stream_);
}

std::uint32_t Replayer::Words(std::uint32_t storage) const {
  const std::uint64_t words = std::max<std::uint64_t>(1, (w_.storages[storage].bytes + 7) / 8);
  if (words > UINT32_MAX) throw std::runtime_error("storage larger than 32 GiB is not supported");
  return static_cast<std::uint32_t>(words);
}

void Replayer::Launch(CUfunction f, void** params) {
  Check(api_, api_.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream_, params, nullptr),
        "cuLaunchKernel");
}

void Replayer::Allocate(std::uint32_t storage, bool init) {
  ptr_[storage] = alloc_->Allocate(w_.storages[storage].bytes);
  if (!init) return;
  InitLaunch l;
  l.ptr = ptr_[storage];
  l.words = Words(storage);
  l.stride = options_.sample_stride;
  const std::uint64_t seed = SeedOf(w_.storages[storage], storage);
  l.seed_lo = static_cast<std::uint32_t>(seed);
  l.seed_hi = static_cast<std::uint32_t>(seed >> 32);
  void* params[simgpu::kMaxKernelParams];
  l.ParamPointers(params);
  Launch(init_fn_, params);
}

double Replayer::ElapsedNs(CUevent a, CUevent b) {
  Check(api_, api_.cuEventSynchronize(b), "cuEventSynchronize");
  float ms = 0;
  Check(api_, api_.cuEventElapsedTime(&ms, a, b), "cuEventElapsedTime");
  return static_cast<double>(ms) * 1e6;
}

// Measures the driver's kernel timing model (launch latency, bytes per ns) with two timed
// launches, so recorded durations are reproduced whatever the device is configured as. A long
// kernel first puts the stream ahead of the host clock, so host call time cannot leak in.
void Replayer::Calibrate() {
  constexpr float kProbeBytes = 1e10f;
  auto launch = [&](float bytes) {
    OpLaunch l;
    l.cost_bytes = bytes;
    l.digest = digest_;
    void* params[simgpu::kMaxKernelParams];
    l.ParamPointers(params);
    Launch(probe_fn_, params);
  };
  CUevent mid = nullptr;
  Check(api_, api_.cuEventCreate(&mid, CU_EVENT_DEFAULT), "cuEventCreate");
  launch(kProbeBytes);
  Check(api_, api_.cuEventRecord(start_, stream_), "cuEventRecord");
  launch(0);
  Check(api_, api_.cuEventRecord(mid, stream_), "cuEventRecord");
  launch(kProbeBytes);
  Check(api_, api_.cuEventRecord(end_, stream_), "cuEventRecord");
  latency_ns_ = ElapsedNs(start_, mid);
  const double transfer_ns = ElapsedNs(mid, end_) - latency_ns_;
  api_.cuEventDestroy(mid);
  if (!(transfer_ns > 0)) throw std::runtime_error("cannot calibrate the driver's kernel timing");
  bytes_per_ns_ = kProbeBytes / transfer_ns;
  // The probes folded into the digest; start it from zero so only the replay counts.
  const std::uint64_t zero = 0;
  Check(api_, api_.cuMemcpyHtoD(digest_, &zero, 8), "cuMemcpyHtoD(digest)");
}

void Replayer::AllocatePersistent() {
  for (std::uint32_t s = 0; s < w_.storages.size(); ++s) {
    if (w_.storages[s].persistent) Allocate(s, true);
  }
}

// Inputs first, then outputs, 13 tensors per launch; the op's cost rides on the first launch.
void Replayer::LaunchOp(std::uint32_t index) {
  const trace::WorkOp& op = w_.ops[index];
  std::vector<CUdeviceptr> ptrs;
  std::vector<std::uint32_t> words;
  for (auto list : {&op.reads, &op.writes}) {
    for (std::uint32_t s : *list) {
      ptrs.push_back(ptr_[s]);
      words.push_back(Words(s));
    }
  }
  const std::size_t n = ptrs.size();
  for (std::size_t chunk = 0, first = 0; chunk == 0 || first < n;
       ++chunk, first += kTensorsPerLaunch) {
    OpLaunch l;
    l.salt = op.token * 65599u + static_cast<std::uint32_t>(chunk);
    l.cost_bytes = chunk == 0 ? CostBytes(op, latency_ns_, bytes_per_ns_) : 0.f;
    l.stride = options_.sample_stride;
    l.digest = digest_;
    for (std::size_t t = first; t < n && t < first + kTensorsPerLaunch; ++t) {
      l.ptr[t - first] = ptrs[t];
      l.words[t - first] = words[t];
      (t < op.reads.size() ? l.n_in : l.n_out) += 1;
    }
    void* params[simgpu::kMaxKernelParams];
    l.ParamPointers(params);
    Launch(op_fns_[op.token], params);
  }
}

double Replayer::RunIteration(int iteration, const IterationPlan& plan) {
  Check(api_, api_.cuEventRecord(start_, stream_), "cuEventRecord");
  for (std::size_t q = 0; q < plan.ops.size(); ++q) {
    where_ = "iteration " + std::to_string(iteration) + ", op " + std::to_string(q) + " (" +
             trace_.nodes[w_.ops[plan.ops[q]].node].name + ")";
    for (const Allocation& a : plan.alloc_before[q]) Allocate(a.storage, a.init);
    LaunchOp(plan.ops[q]);
    for (std::uint32_t s : plan.free_after[q]) {
      alloc_->Free(ptr_[s], w_.storages[s].bytes);
      ptr_[s] = 0;
    }
  }
  Check(api_, api_.cuEventRecord(end_, stream_), "cuEventRecord");
  Check(api_, api_.cuEventSynchronize(end_), "cuEventSynchronize");
  float ms = 0;
  Check(api_, api_.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime");
  return static_cast<double>(ms) / 1000.0;
}

// Flips the low bit of the first byte (a sampled word) of the first persistent input of the
// iteration's first op that has one.
void Replayer::CorruptOneInputByte(int iteration, const IterationPlan& plan) {
  for (std::uint32_t op : plan.ops) {
    for (std::uint32_t s : w_.ops[op].reads) {
      if (!w_.storages[s].persistent) continue;
      Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
      unsigned char byte = 0;
      Check(api_, api_.cuMemcpyDtoH(&byte, ptr_[s], 1), "cuMemcpyDtoH");
      byte ^= 1;
      Check(api_, api_.cuMemcpyHtoD(ptr_[s], &byte, 1), "cuMemcpyHtoD");
      std::fprintf(stderr,
                   "chameleon-replay: test hook flipped one byte of storage %" PRIu64
                   " before iteration %d\n",
                   w_.storages[s].storage_id, iteration);
      return;
    }
  }
}

std::uint64_t Replayer::ReadChecksum() {
  for (std::uint32_t s = 0; s < w_.storages.size(); ++s) {
    if (!w_.storages[s].persistent) continue;
    DigestLaunch l;
    l.digest = digest_;
    l.ptr = ptr_[s];
    l.words = Words(s);
    l.stride = options_.sample_stride;
    void* params[simgpu::kMaxKernelParams];
    l.ParamPointers(params);
    Launch(digest_fn_, params);
  }
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  std::uint64_t checksum = 0;
  Check(api_, api_.cuMemcpyDtoH(&checksum, digest_, 8), "cuMemcpyDtoH(checksum)");
  return checksum;
}

void Replayer::Run() {
  Setup();
  Calibrate();
  where_ = "allocating persistent storages";
  AllocatePersistent();
  // What stays live between iterations (scripts/evaluate's transfer bound needs it). stderr:
  // stdout holds only the lines compared across runs.
  std::fprintf(stderr, "chameleon-replay: persistent bytes %" PRIu64 "\n", alloc_->live_bytes());
  int shifts = 0;
  for (int i = 0; i < options_.iterations; ++i) {
    if (options_.perturb_every > 0 && i > 0 && i % options_.perturb_every == 0) {
      ++shifts;
      std::printf("shift at iteration %d\n", i);
    }
    const std::size_t step = static_cast<std::size_t>(i) % w_.steps.size();
    std::vector<std::uint32_t> ops = StepOps(w_, step);
    if (shifts > 0)
      ops = Perturb(std::move(ops), options_.perturb_fraction,
                    static_cast<std::uint64_t>(shifts) * 7919 + step);
    const IterationPlan plan = PlanIteration(w_, std::move(ops));
    if (options_.corrupt_at_iteration == i) CorruptOneInputByte(i, plan);
    const double seconds = RunIteration(i, plan);
    if (i == 0) first_iteration_s_ = seconds;
    std::printf("iteration %d time %.6f\n", i, seconds);
    std::fflush(stdout);
  }
  where_ = "checksum";
  const std::uint64_t checksum = ReadChecksum();
  std::printf("peak %" PRIu64 "\n", alloc_->peak_bytes());
  std::printf("checksum %016" PRIx64 "\n", checksum);
  std::fflush(stdout);
}

}  // namespace chameleon::replay
