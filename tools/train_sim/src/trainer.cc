#include "trainer.h"

#include <cinttypes>
#include <cstdio>
#include <stdexcept>

namespace chameleon::train_sim {
namespace {

std::uint64_t Mix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Trainer::Trainer(const Options& options, const DriverApi& api) : options_(options), api_(api) {}

Trainer::~Trainer() = default;

void Trainer::Run() {
  try {
    Setup();
    Train();
    Teardown();
  } catch (...) {
    // Let queued kernels finish before members are destroyed under them. The result does not
    // matter: the original error is what the user must see.
    if (context_ != nullptr) api_.cuCtxSynchronize();
    throw;
  }
}

void Trainer::Setup() {
  Check(api_, api_.cuInit(0), "cuInit");
  Check(api_, api_.cuDeviceGet(&device_, 0), "cuDeviceGet");
  Check(api_, api_.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain");
  Check(api_, api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent");
  Check(api_, api_.cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate");
  Check(api_, api_.cuEventCreate(&start_, CU_EVENT_DEFAULT), "cuEventCreate");
  Check(api_, api_.cuEventCreate(&end_, CU_EVENT_DEFAULT), "cuEventCreate");
  alloc_ = MakeAllocator(options_.alloc, api_, device_, stream_);
  launcher_ = std::make_unique<Launcher>(api_, stream_);
  ModelConfig config;
  config.layers = options_.layers;
  config.hidden = options_.hidden;
  config.seq = options_.seq;
  config.batch = options_.batch;
  config.heads = options_.heads;
  config.head_dim = options_.head_dim;
  config.vocab = kVocab;
  config.recompute = options_.recompute;
  config.aux_head = options_.dynamic > 0;
  model_ = std::make_unique<Model>(config, api_, *alloc_, *launcher_, stream_);
  model_->Init(options_.seed);
  if (options_.pointer_table) {
    gather_ = std::make_unique<PointerTableGather>(api_, *alloc_, stream_, model_->params());
  }
  persistent_bytes_ = alloc_->live_bytes();
  hooks_ =
      std::make_unique<RunHooks>(api_, options_.stop_file, options_.grow_file, options_.grow_bytes);
  launcher_->TakeSequenceHash();  // initialisation is not part of any step
}

void Trainer::Train() {
  for (int step = 0; step < options_.steps; ++step) {
    // Between steps only (run_hooks.h): the steps run are whole, whatever the files say.
    if (hooks_->StopBefore(step)) break;
    hooks_->MaybeGrow(step);
    if (options_.corrupt_at_step == step) CorruptOneWeightByte(step);
    Step(step);
  }
  if (options_.corrupt_at_step == options_.steps) CorruptOneWeightByte(options_.steps);
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  hooks_->Verify();
  // What stays live between steps (scripts/evaluate's transfer bound needs it). stderr: stdout
  // holds only the lines compared across runs.
  std::fprintf(stderr, "chameleon-train-sim: persistent bytes %zu\n", persistent_bytes_);
  const std::uint64_t checksum = ChecksumFromDevice();
  std::printf("peak %zu\n", alloc_->peak_bytes());
  std::printf("checksum %016" PRIx64 "\n", checksum);
  std::fflush(stdout);
  if (api_.simgpu_physical_usage != nullptr) {
    std::uint64_t live = 0, high = 0;
    if (api_.simgpu_physical_usage(static_cast<int>(device_), &live, &high) == 0) {
      std::fprintf(stderr,
                   "chameleon-train-sim: simgpu physical bytes live %" PRIu64
                   ", high-water %" PRIu64 "\n",
                   live, high);
    }
  }
}

void Trainer::Step(int step) {
  const bool aux = AuxBranchOn(options_, step);
  const bool skip = SkipOptimizerStep(options_, step);
  const std::size_t rows = static_cast<std::size_t>(options_.batch) * options_.seq;
  std::vector<std::int32_t> host_tokens, host_targets;
  MakeBatch(step, &host_tokens, &host_targets);
  float host_loss = 0.f;

  Check(api_, api_.cuEventRecord(start_, stream_), "cuEventRecord");
  Tensor tokens = alloc_->Allocate(rows * sizeof(std::int32_t));
  Tensor targets = alloc_->Allocate(rows * sizeof(std::int32_t));
  Tensor loss = alloc_->Allocate(sizeof(float));
  Check(api_, api_.cuMemcpyHtoDAsync(tokens.ptr, host_tokens.data(), tokens.bytes, stream_),
        "cuMemcpyHtoDAsync(tokens)");
  Check(api_, api_.cuMemcpyHtoDAsync(targets.ptr, host_targets.data(), targets.bytes, stream_),
        "cuMemcpyHtoDAsync(targets)");
  model_->ForwardBackward(tokens, targets, loss, aux);
  // --pointer-table: between backward and the optimizer step, where memory pressure is highest
  // and a swapping runtime is most likely to have moved a weight.
  if (gather_) gather_->Launch();
  if (!skip) model_->OptimizerStep();
  model_->DropGrads();
  Check(api_, api_.cuMemcpyDtoHAsync(&host_loss, loss.ptr, sizeof(float), stream_),
        "cuMemcpyDtoHAsync(loss)");
  alloc_->Free(loss);
  alloc_->Free(targets);
  alloc_->Free(tokens);
  Check(api_, api_.cuEventRecord(end_, stream_), "cuEventRecord");
  // The host buffers above stay alive until here, where the stream has consumed them.
  Check(api_, api_.cuEventSynchronize(end_), "cuEventSynchronize");
  if (gather_) gather_->Fold();
  float ms = 0.f;
  Check(api_, api_.cuEventElapsedTime(&ms, start_, end_), "cuEventElapsedTime");

  if (alloc_->live_bytes() != persistent_bytes_) {
    throw std::logic_error("train-sim bug: activations leaked across a step");
  }
  const std::uint64_t sequence = launcher_->TakeSequenceHash();
  if (step > 0 && sequence != previous_sequence_) std::printf("shift at step %d\n", step);
  previous_sequence_ = sequence;
  std::printf("step %d loss %.6f time %.6f\n", step, static_cast<double>(host_loss),
              static_cast<double>(ms) / 1000.0);
  std::fflush(stdout);
}

// Learnable synthetic text: each sequence is an arithmetic progression of byte tokens (random
// start and stride) with 1 token in 16 replaced by noise, so the loss falls as the model learns
// to continue the progression from context.
void Trainer::MakeBatch(int step, std::vector<std::int32_t>* tokens,
                        std::vector<std::int32_t>* targets) const {
  std::uint64_t state = options_.seed * 0xff51afd7ed558ccdull + static_cast<std::uint64_t>(step);
  const int seq = options_.seq;
  tokens->resize(static_cast<std::size_t>(options_.batch) * seq);
  targets->resize(tokens->size());
  for (int b = 0; b < options_.batch; ++b) {
    const std::uint64_t stride = 1 + Mix(state) % 7;
    std::uint64_t current = Mix(state) % kVocab;
    for (int t = 0; t <= seq; ++t) {
      const std::uint64_t next = (current + stride) % kVocab;
      const std::int32_t token =
          static_cast<std::int32_t>(Mix(state) % 16 == 0 ? Mix(state) % kVocab : current);
      if (t < seq) (*tokens)[static_cast<std::size_t>(b) * seq + t] = token;
      if (t > 0) (*targets)[static_cast<std::size_t>(b) * seq + t - 1] = token;
      current = next;
    }
  }
}

// Test hook (--corrupt-at-step): flips one bit in a byte of a weight, in device memory, through
// the driver's copy API, so a test can show that the checksum sees corruption.
void Trainer::CorruptOneWeightByte(int step) {
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  Param& target = model_->corruption_target();
  const CUdeviceptr at = target.value.ptr + target.count / 2 * sizeof(float) + 2;
  unsigned char byte = 0;
  Check(api_, api_.cuMemcpyDtoH(&byte, at, 1), "cuMemcpyDtoH(corruption)");
  byte ^= 0x40;
  Check(api_, api_.cuMemcpyHtoD(at, &byte, 1), "cuMemcpyHtoD(corruption)");
  std::fprintf(stderr, "chameleon-train-sim: test hook corrupted one byte of %s before step %d\n",
               target.name.c_str(), step);
}

// FNV-1a over every weight's bytes, read back from device memory (never from a host copy).
std::uint64_t Trainer::ChecksumFromDevice() {
  std::uint64_t hash = 0xcbf29ce484222325ull;
  std::vector<unsigned char> host;
  for (const Param& param : model_->params()) {
    host.resize(param.value.bytes);
    Check(api_, api_.cuMemcpyDtoH(host.data(), param.value.ptr, host.size()),
          "cuMemcpyDtoH(" + param.name + ")");
    for (unsigned char byte : host) hash = (hash ^ byte) * 0x100000001b3ull;
  }
  if (gather_) {
    // --pointer-table: what every step gathered through the table counts too.
    const std::uint64_t gathered = gather_->hash();
    for (int i = 0; i < 8; ++i) hash = (hash ^ ((gathered >> (8 * i)) & 0xff)) * 0x100000001b3ull;
  }
  return hash;
}

void Trainer::Teardown() {
  if (gather_) gather_->Release();
  hooks_->Release();
  model_->Release();
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  alloc_->ReleaseAll();
  launcher_.reset();
  api_.cuEventDestroy(start_);
  api_.cuEventDestroy(end_);
  api_.cuStreamDestroy(stream_);
  api_.cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
}

}  // namespace chameleon::train_sim
