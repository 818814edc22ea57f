#include "pipeline_trainer.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "sampled_kernel.h"

namespace chameleon::train_sim {
namespace {

constexpr std::size_t kDigestBytes = 8;
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

std::uint64_t Mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t FnvBytes(std::uint64_t hash, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) hash = (hash ^ ((value >> (8 * i)) & 0xffu)) * kFnvPrime;
  return hash;
}

}  // namespace

PipelineTrainer::PipelineTrainer(const Options& options, const DriverApi& api)
    : options_(options), api_(api) {}

PipelineTrainer::~PipelineTrainer() = default;

void PipelineTrainer::Run() {
  Setup();
  for (int step = 0; step < options_.steps; ++step) Step(step);
  const std::uint64_t checksum = ChecksumFromDevice();
  std::printf("peak %zu\n", total_.peak);
  for (const auto& s : stages_) std::printf("device %d peak %zu\n", s->index(), s->peak_bytes());
  std::size_t persistent = 0, optimizer = 0;
  for (std::size_t i = 0; i < stages_.size(); ++i) {
    persistent += persistent_[i];
    optimizer += stages_[i]->model().optimizer_state_bytes();
  }
  std::printf("persistent %zu\n", persistent);
  for (const auto& s : stages_) {
    std::printf("device %d persistent %zu\n", s->index(),
                persistent_[static_cast<std::size_t>(s->index())]);
  }
  std::printf("optimizer-state %zu\n", optimizer);
  for (std::size_t i = 0; i < stages_.size(); ++i)
    std::printf("device %zu busy %.6f\n", i, busy_s_[i]);
  std::printf("checksum %016" PRIx64 "\n", checksum);
  std::fflush(stdout);
  std::fprintf(stderr,
               "chameleon-train-sim: model FLOPs per step %.6e (6*N*tokens + attention, "
               "N = %.6e; %d micro-batches)\n",
               ModelFlopsPerStep(options_.shape) * options_.micro_batches,
               FlopParameters(options_.shape), options_.micro_batches);
  for (auto& s : stages_) s->Teardown();
}

void PipelineTrainer::Setup() {
  Check(api_, api_.cuInit(0), "cuInit");
  int devices = 0;
  Check(api_, api_.cuDeviceGetCount(&devices), "cuDeviceGetCount");
  const int n = options_.pipeline;
  if (devices < n) {
    throw std::runtime_error("--pipeline " + std::to_string(n) + " needs " + std::to_string(n) +
                             " devices, the driver has " + std::to_string(devices) +
                             " (simgpu: SIMGPU_DEVICES)");
  }
  for (int i = 0; i < n; ++i) {
    const LayerRange r = StageLayers(options_.shape.layers, n, i);
    const StageSlice slice{r.first, r.end, i == 0, i == n - 1};
    stages_.push_back(std::make_unique<PipelineStage>(options_, api_, i, slice, &total_));
    schedules_.push_back(OneForwardOneBackward(n, i, options_.micro_batches));
  }
  spans_.resize(static_cast<std::size_t>(n));
  busy_s_.assign(static_cast<std::size_t>(n), 0.0);
  for (int i = 0; i + 1 < n; ++i) {
    stages_[static_cast<std::size_t>(i)]->EnablePeerAccess(
        *stages_[static_cast<std::size_t>(i) + 1]);
    stages_[static_cast<std::size_t>(i) + 1]->EnablePeerAccess(
        *stages_[static_cast<std::size_t>(i)]);
  }
  // Weights first on every device, as one process per stage would.
  for (auto& s : stages_) {
    s->Use();
    s->model().Init();
    persistent_.push_back(s->live_bytes());
  }
}

bool PipelineTrainer::Ready(int stage, const PipelineAction& a) const {
  const MicroBatch& mb = micro_[static_cast<std::size_t>(a.micro_batch)];
  const int last = options_.pipeline - 1;
  if (a.forward) return stage == 0 || mb.forward_done[static_cast<std::size_t>(stage) - 1];
  return stage == last || mb.backward_done[static_cast<std::size_t>(stage) + 1];
}

void PipelineTrainer::Step(int step) {
  const int n = options_.pipeline, m = options_.micro_batches;
  const auto stages = static_cast<std::size_t>(n);
  const std::size_t tokens = Tokens(options_.shape);
  micro_.assign(static_cast<std::size_t>(m), MicroBatch{});
  for (int k = 0; k < m; ++k) {
    MicroBatch& mb = micro_[static_cast<std::size_t>(k)];
    mb.tokens.resize(tokens);
    mb.targets.resize(tokens);
    // The same data as the one-stage trainer's step `sample` (micro-batch k of step `step`).
    const auto sample = static_cast<std::uint64_t>(step) * static_cast<std::uint64_t>(m) +
                        static_cast<std::uint64_t>(k);
    std::uint64_t state = options_.seed * 0xff51afd7ed558ccdull + sample;
    for (std::size_t i = 0; i < tokens; ++i) {
      mb.tokens[i] =
          static_cast<std::int32_t>(Mix(state += 0x9e3779b97f4a7c15ull) %
                                    static_cast<std::uint64_t>(options_.shape.arch.vocab));
      if (i > 0) mb.targets[i - 1] = mb.tokens[i];
    }
    mb.out.resize(stages);
    mb.grad.resize(stages);
    mb.out_ready.resize(stages);
    mb.grad_ready.resize(stages);
    mb.forward_done.assign(stages, false);
    mb.backward_done.assign(stages, false);
  }
  std::vector<PipelineStage::Mark> start(stages);
  for (std::size_t i = 0; i < stages; ++i) start[i] = stages_[i]->Record(Issue());
  Upload();

  // Issue every stage's schedule as far as its neighbours' issued work allows: a forward needs
  // the previous stage's forward of that micro-batch issued, a backward the next stage's
  // backward. 1F1B never deadlocks, so each round issues something.
  std::vector<std::size_t> next(stages, 0);
  for (bool pending = true; pending;) {
    pending = false;
    bool progressed = false;
    for (std::size_t i = 0; i < stages; ++i) {
      const auto& schedule = schedules_[i];
      while (next[i] < schedule.size() && Ready(static_cast<int>(i), schedule[next[i]])) {
        const PipelineAction& a = schedule[next[i]++];
        const int sample = step * m + a.micro_batch;
        MicroBatch& mb = micro_[static_cast<std::size_t>(a.micro_batch)];
        try {
          if (a.forward) {
            Forward(static_cast<int>(i), mb, sample);
          } else {
            Backward(static_cast<int>(i), mb, sample);
          }
        } catch (const OutOfMemory& e) {
          // Name the device: under a per-device limit, which stage ran out is the point.
          throw OutOfMemory(e.result(), "device " + std::to_string(i) + ": " + e.what());
        }
        progressed = true;
      }
      pending = pending || next[i] < schedule.size();
    }
    if (pending && !progressed) throw std::logic_error("train-sim bug: pipeline schedule stuck");
  }

  // Every stage has finished its backwards: after seeing its neighbours' last marks, what it
  // sent them has been copied and is freed; then each stage's optimizer step.
  std::vector<PipelineStage::Mark> drained(stages);
  for (std::size_t i = 0; i < stages; ++i) drained[i] = stages_[i]->Record(Issue());
  std::vector<PipelineStage::Mark> end(stages);
  for (std::size_t i = 0; i < stages; ++i) {
    PipelineStage& s = *stages_[i];
    if (i > 0) s.Wait(drained[i - 1], static_cast<int>(i) - 1);
    if (i + 1 < stages) s.Wait(drained[i + 1], static_cast<int>(i) + 1);
    s.FreeAllSent();
    s.model().set_step(step);
    const PipelineStage::Mark before = s.Record(Issue());
    s.model().OptimizerStep(/*skip=*/false);
    end[i] = s.Record(Issue());
    spans_[i].emplace_back(before, end[i]);
  }
  Download();
  double seconds = 0;
  for (std::size_t i = 0; i < stages; ++i) {
    stages_[i]->Use();
    Check(api_, api_.cuEventSynchronize(end[i].event), "cuEventSynchronize");
    float ms = 0.f;
    Check(api_, api_.cuEventElapsedTime(&ms, start[i].event, end[i].event), "cuEventElapsedTime");
    seconds = std::max(seconds, static_cast<double>(ms) / 1000.0);
    busy_s_[i] = 0;
    for (const auto& [from, to] : spans_[i]) {
      Check(api_, api_.cuEventElapsedTime(&ms, from.event, to.event), "cuEventElapsedTime");
      busy_s_[i] += static_cast<double>(ms) / 1000.0;
    }
    spans_[i].clear();
  }
  for (std::size_t i = 0; i < stages; ++i) {
    stages_[i]->DropEvents();
    if (stages_[i]->live_bytes() != persistent_[i]) {
      throw std::logic_error("train-sim bug: activations leaked across a step on device " +
                             std::to_string(i));
    }
  }
  // One micro-batch: its own digest, as the one-stage trainer prints; more: FNV-1a over theirs.
  std::uint64_t digest = micro_.front().digest;
  if (m > 1) {
    digest = kFnvOffset;
    for (const MicroBatch& mb : micro_) digest = FnvBytes(digest, mb.digest, 8);
  }
  std::printf("step %d digest %016" PRIx64 " time %.6f\n", step, digest, seconds);
  std::fflush(stdout);
}

// Every micro-batch's tokens (stage 0) and targets (the last stage, as a pipeline's data loader
// sends the labels there) are uploaded at the start of the step: a copy from pageable memory
// waits for its stream, so uploading each before its forward would hold the host (and with it
// every other stage's issue) until that stage had caught up.
void PipelineTrainer::Upload() {
  PipelineStage& first = *stages_.front();
  PipelineStage& last = *stages_.back();
  for (MicroBatch& mb : micro_) {
    mb.t_tokens = first.Allocate(mb.tokens.size() * sizeof(std::int32_t));
    Check(api_,
          api_.cuMemcpyHtoDAsync(mb.t_tokens.ptr, mb.tokens.data(), mb.t_tokens.bytes,
                                 first.stream()),
          "cuMemcpyHtoDAsync(tokens)");
    mb.t_targets = last.Allocate(mb.targets.size() * sizeof(std::int32_t));
    mb.loss = last.Allocate(kDigestBytes);
    Check(api_,
          api_.cuMemcpyHtoDAsync(mb.t_targets.ptr, mb.targets.data(), mb.t_targets.bytes,
                                 last.stream()),
          "cuMemcpyHtoDAsync(targets)");
  }
}

// The digests come back after every stage's work is issued, for the same reason.
void PipelineTrainer::Download() {
  PipelineStage& last = *stages_.back();
  for (MicroBatch& mb : micro_) {
    last.Use();
    Check(api_, api_.cuMemcpyDtoHAsync(&mb.digest, mb.loss.ptr, kDigestBytes, last.stream()),
          "cuMemcpyDtoHAsync(digest)");
    last.Free(mb.loss);
  }
}

void PipelineTrainer::Forward(int stage, MicroBatch& mb, int sample) {
  const auto i = static_cast<std::size_t>(stage);
  PipelineStage& s = *stages_[i];
  const bool first = stage == 0, last = stage + 1 == options_.pipeline;
  s.model().set_step(sample);
  StageInput in;
  if (first) {
    in.tokens = mb.t_tokens;
  } else {
    PipelineStage& sender = *stages_[i - 1];
    s.Wait(mb.out_ready[i - 1], stage - 1);
    in.input = s.Receive(sender, mb.out[i - 1], Issue());
    mb.out[i - 1] = Tensor{};  // the sender frees it once it sees the copy done
  }
  if (last) {
    in.targets = mb.t_targets;
    in.loss = mb.loss;
  }
  const PipelineStage::Mark before = s.Record(Issue());
  s.Use();
  const Tensor out = s.model().ForwardStage(in);
  const PipelineStage::Mark after = s.Record(Issue());
  spans_[i].emplace_back(before, after);
  if (!last) {
    mb.out[i] = out;
    mb.out_ready[i] = after;
  }
  s.model().Park(static_cast<int>(&mb - micro_.data()));
  mb.forward_done[i] = true;
}

void PipelineTrainer::Backward(int stage, MicroBatch& mb, int sample) {
  const auto i = static_cast<std::size_t>(stage);
  PipelineStage& s = *stages_[i];
  const bool first = stage == 0, last = stage + 1 == options_.pipeline;
  s.Use();
  s.model().set_step(sample);
  s.model().Resume(static_cast<int>(&mb - micro_.data()));
  Tensor d_output;
  if (!last) {
    PipelineStage& sender = *stages_[i + 1];
    s.Wait(mb.grad_ready[i + 1], stage + 1);
    d_output = s.Receive(sender, mb.grad[i + 1], Issue());
    mb.grad[i + 1] = Tensor{};
  }
  const PipelineStage::Mark before = s.Record(Issue());
  s.Use();
  const Tensor d_input = s.model().BackwardStage(d_output);
  const PipelineStage::Mark after = s.Record(Issue());
  spans_[i].emplace_back(before, after);
  if (!first) {
    mb.grad[i] = d_input;
    mb.grad_ready[i] = after;
  } else {
    s.Free(mb.t_tokens);
  }
  if (last) s.Free(mb.t_targets);
  mb.backward_done[i] = true;
}

// FNV-1a over every sampled word of every weight, master copy and moment, stage by stage (the
// one-stage trainer's parameter order), read back from device memory with cuMemcpyDtoH.
std::uint64_t PipelineTrainer::ChecksumFromDevice() {
  std::uint64_t hash = kFnvOffset;
  for (auto& s : stages_) {
    s->Use();
    Check(api_, api_.cuStreamSynchronize(s->stream()), "cuStreamSynchronize");
    for (const ShapedParam& p : s->model().params()) {
      for (const Tensor* t : {&p.weight, &p.master, &p.m, &p.v}) {
        ForEachSampledWord(t->bytes, [&](std::size_t offset) {
          std::uint32_t word = 0;
          Check(api_, api_.cuMemcpyDtoH(&word, t->ptr + offset, sizeof word),
                "cuMemcpyDtoH(" + p.name + ")");
          hash = FnvBytes(hash, word, 4);
        });
      }
    }
  }
  return hash;
}

}  // namespace chameleon::train_sim
