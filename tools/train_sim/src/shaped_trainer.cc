#include "shaped_trainer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "sampled_kernel.h"

namespace chameleon::train_sim {
namespace {

constexpr std::size_t kDigestBytes = 8;

std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

ShapedTrainer::ShapedTrainer(const Options& options, const DriverApi& api)
    : options_(options), api_(api) {}

ShapedTrainer::~ShapedTrainer() = default;

void ShapedTrainer::Run() {
  try {
    Setup();
    for (int step = 0; step < options_.steps; ++step) Step(step);
    Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
    const std::uint64_t checksum = ChecksumFromDevice();
    std::printf("phases forward %.6f backward %.6f optimizer %.6f\n", phases_[0], phases_[1],
                phases_[2]);
    std::printf("peak %zu\n", alloc_->peak_bytes());
    std::printf("persistent %zu\n", persistent_bytes_);
    std::printf("optimizer-state %zu\n", model_->optimizer_state_bytes());
    std::printf("checksum %016" PRIx64 "\n", checksum);
    std::fflush(stdout);
    std::fprintf(stderr,
                 "chameleon-train-sim: model FLOPs per step %.6e (6*N*tokens + attention, "
                 "N = %.6e)\n",
                 ModelFlopsPerStep(options_.shape), FlopParameters(options_.shape));
    Teardown();
  } catch (...) {
    // Let queued kernels finish before members are destroyed under them.
    if (context_ != nullptr) api_.cuCtxSynchronize();
    throw;
  }
}

void ShapedTrainer::Setup() {
  Check(api_, api_.cuInit(0), "cuInit");
  Check(api_, api_.cuDeviceGet(&device_, 0), "cuDeviceGet");
  Check(api_, api_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  Check(api_, api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  Check(api_, api_.cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
  for (CUevent& e : events_) Check(api_, api_.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  alloc_ = MakeAllocator(options_.alloc, api_, device_, stream_);
  launcher_ = std::make_unique<SampledLauncher>(api_, stream_);
  model_ = std::make_unique<ShapedModel>(options_.shape, options_.recompute, *alloc_, *launcher_);
  model_->Init();
  persistent_bytes_ = alloc_->live_bytes();
  launcher_->TakeSequenceHash();  // initialisation is not part of any step
}

double ShapedTrainer::Seconds(CUevent from, CUevent to) {
  float ms = 0.f;
  Check(api_, api_.cuEventElapsedTime(&ms, from, to), "cuEventElapsedTime");
  return static_cast<double>(ms) / 1000.0;
}

void ShapedTrainer::Step(int step) {
  const bool aux = AuxBranchOn(options_, step);
  const bool skip = SkipOptimizerStep(options_, step);
  const std::size_t tokens = Tokens(options_.shape);
  // Token ids: a deterministic function of seed and step (their values only seed the digests).
  std::vector<std::int32_t> host_tokens(tokens), host_targets(tokens);
  std::uint64_t state = options_.seed * 0xff51afd7ed558ccdull + static_cast<std::uint64_t>(step);
  for (std::size_t i = 0; i < tokens; ++i) {
    host_tokens[i] =
        static_cast<std::int32_t>(Mix(state += 0x9e3779b97f4a7c15ull) %
                                  static_cast<std::uint64_t>(options_.shape.arch.vocab));
    if (i > 0) host_targets[i - 1] = host_tokens[i];
  }
  std::uint64_t digest = 0;
  model_->set_step(step);

  Check(api_, api_.cuEventRecord(events_[0], stream_), "cuEventRecord");
  Tensor t_tokens = alloc_->Allocate(tokens * sizeof(std::int32_t));
  Tensor t_targets = alloc_->Allocate(tokens * sizeof(std::int32_t));
  Tensor loss = alloc_->Allocate(kDigestBytes);
  Check(api_, api_.cuMemcpyHtoDAsync(t_tokens.ptr, host_tokens.data(), t_tokens.bytes, stream_),
        "cuMemcpyHtoDAsync(tokens)");
  Check(api_, api_.cuMemcpyHtoDAsync(t_targets.ptr, host_targets.data(), t_targets.bytes, stream_),
        "cuMemcpyHtoDAsync(targets)");
  model_->Forward(t_tokens, t_targets, loss, aux);
  Check(api_, api_.cuEventRecord(events_[1], stream_), "cuEventRecord");
  if (options_.corrupt_at_step == step) CorruptOneActivationGranule(step);
  model_->Backward();
  Check(api_, api_.cuEventRecord(events_[2], stream_), "cuEventRecord");
  model_->OptimizerStep(skip);
  Check(api_, api_.cuEventRecord(events_[3], stream_), "cuEventRecord");
  Check(api_, api_.cuMemcpyDtoHAsync(&digest, loss.ptr, kDigestBytes, stream_),
        "cuMemcpyDtoHAsync(digest)");
  alloc_->Free(loss);
  alloc_->Free(t_targets);
  alloc_->Free(t_tokens);
  Check(api_, api_.cuEventRecord(events_[4], stream_), "cuEventRecord");
  // The host buffers above stay alive until here, where the stream has consumed them.
  Check(api_, api_.cuEventSynchronize(events_[4]), "cuEventSynchronize");
  for (std::size_t i = 0; i < phases_.size(); ++i) phases_[i] = Seconds(events_[i], events_[i + 1]);
  if (alloc_->live_bytes() != persistent_bytes_) {
    throw std::logic_error("train-sim bug: activations leaked across a step");
  }
  const std::uint64_t sequence = launcher_->TakeSequenceHash();
  if (step > 0 && sequence != previous_sequence_) std::printf("shift at step %d\n", step);
  previous_sequence_ = sequence;
  std::printf("step %d digest %016" PRIx64 " time %.6f\n", step, digest,
              Seconds(events_[0], events_[4]));
  std::fflush(stdout);
}

// Test hook (--corrupt-at-step with --model): between forward and backward, zero one 2 MiB
// granule in the middle of layer 0's largest saved activation, as a swap that lost that range
// would, through the driver's copy API.
void ShapedTrainer::CorruptOneActivationGranule(int step) {
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  const Tensor target = model_->CorruptionTarget();
  const std::size_t granules = target.bytes / kSampleGranule;
  const std::size_t offset = granules / 2 * kSampleGranule;
  const std::size_t length = std::min(kSampleGranule, target.bytes - offset);
  const std::vector<unsigned char> zeros(length, 0);
  Check(api_, api_.cuMemcpyHtoD(target.ptr + offset, zeros.data(), length),
        "cuMemcpyHtoD(corruption)");
  std::fprintf(stderr,
               "chameleon-train-sim: test hook zeroed bytes [%zu, %zu) of a %zu-byte layer-0 "
               "activation before backward of step %d\n",
               offset, offset + length, target.bytes, step);
}

// FNV-1a over every sampled word of every weight, master copy and moment, read back from device
// memory with cuMemcpyDtoH (never from a host copy).
std::uint64_t ShapedTrainer::ChecksumFromDevice() {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  for (const ShapedParam& p : model_->params()) {
    for (const Tensor* t : {&p.weight, &p.master, &p.m, &p.v}) {
      ForEachSampledWord(t->bytes, [&](std::size_t offset) {
        std::uint32_t word = 0;
        Check(api_, api_.cuMemcpyDtoH(&word, t->ptr + offset, sizeof word),
              "cuMemcpyDtoH(" + p.name + ")");
        for (int i = 0; i < 4; ++i) hash = (hash ^ ((word >> (8 * i)) & 0xffu)) * 0x100000001b3ull;
      });
    }
  }
  return hash;
}

void ShapedTrainer::Teardown() {
  model_->Release();
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  alloc_->ReleaseAll();
  launcher_.reset();
  for (CUevent e : events_) api_.cuEventDestroy(e);
  api_.cuStreamDestroy(stream_);
  api_.cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
}

}  // namespace chameleon::train_sim
