// Parameters: layout, deterministic initialisation, Adam.
#include <cmath>
#include <string>
#include <vector>

#include "model.h"

namespace chameleon::train_sim {
namespace {

// Uniform(-a, a) with a = 0.02 * sqrt(3) has the standard deviation 0.02 GPT-2 uses.
constexpr float kInitScale = 0.034641016f;
constexpr double kLearningRate = 3e-3;
constexpr float kBeta1 = 0.9f;
constexpr float kBeta2 = 0.999f;
constexpr float kEps = 1e-8f;

std::uint64_t SplitMix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Model::Model(const ModelConfig& config, const DriverApi& api, Allocator& alloc, Launcher& launcher,
             CUstream stream)
    : config_(config),
      api_(api),
      alloc_(alloc),
      launcher_(launcher),
      stream_(stream),
      rows_(config.batch * config.seq) {
  AddParams();
}

void Model::AddParams() {
  const std::size_t h = config_.hidden, v = config_.vocab, s = config_.seq;
  auto add = [this](std::string name, std::size_t count, float scale, float value) {
    Param param;
    param.name = std::move(name);
    param.count = count;
    param.init_scale = scale;
    param.init_value = value;
    params_.push_back(std::move(param));
  };
  add("wte", v * h, kInitScale, 0.f);
  add("wpe", s * h, kInitScale, 0.f);
  add("lnf.gamma", h, 0.f, 1.f);
  add("lnf.beta", h, 0.f, 0.f);
  add("wout", h * v, kInitScale, 0.f);
  for (int l = 0; l < config_.layers; ++l) {
    const std::string p = "layer" + std::to_string(l) + ".";
    add(p + "ln1.gamma", h, 0.f, 1.f);
    add(p + "ln1.beta", h, 0.f, 0.f);
    add(p + "wqkv", h * 3 * h, kInitScale, 0.f);
    add(p + "bqkv", 3 * h, 0.f, 0.f);
    add(p + "wproj", h * h, kInitScale, 0.f);
    add(p + "bproj", h, 0.f, 0.f);
    add(p + "ln2.gamma", h, 0.f, 1.f);
    add(p + "ln2.beta", h, 0.f, 0.f);
    add(p + "wfc", h * 4 * h, kInitScale, 0.f);
    add(p + "bfc", 4 * h, 0.f, 0.f);
    add(p + "wfc2", 4 * h * h, kInitScale, 0.f);
    add(p + "bfc2", h, 0.f, 0.f);
  }
  if (config_.aux_head) add("aux.w", h * h, kInitScale, 0.f);
}

void Model::Init(std::uint64_t seed) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    // Each parameter draws from its own stream so adding the auxiliary head (last) does not
    // change any other weight.
    InitParam(params_[i], seed * 0x100000001b3ull + i + 1);
  }
}

void Model::InitParam(Param& param, std::uint64_t seed) {
  std::vector<float> host(param.count);
  std::uint64_t state = seed;
  for (float& x : host) {
    if (param.init_scale == 0.f) {
      x = param.init_value;
    } else {
      const float u = static_cast<float>(SplitMix64(state) >> 40) * (1.f / 16777216.f);
      x = (2.f * u - 1.f) * param.init_scale;
    }
  }
  param.value = Alloc(param.count);
  param.m = Alloc(param.count);
  param.v = Alloc(param.count);
  // Stream-ordered copy: with the per-tensor style the memory belongs to the stream; the wait
  // keeps `host` alive until the copy has read it.
  Check(api_, api_.cuMemcpyHtoDAsync(param.value.ptr, host.data(), param.value.bytes, stream_),
        "cuMemcpyHtoDAsync(" + param.name + ")");
  const auto n = static_cast<std::int32_t>(param.count);
  launcher_.Launch(KernelId::kFill, param.m.ptr, n, 0.f);
  launcher_.Launch(KernelId::kFill, param.v.ptr, n, 0.f);
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

CUdeviceptr Model::Grad(Param& param) {
  if (!param.grad) param.grad = Alloc(param.count);
  return param.grad.ptr;
}

void Model::OptimizerStep() {
  for (Param& param : params_) {
    if (!param.grad) continue;
    ++param.updates;
    // Bias correction folded into the step size, computed in double on the host.
    const double t = param.updates;
    const double lr_t = kLearningRate * std::sqrt(1.0 - std::pow(double{kBeta2}, t)) /
                        (1.0 - std::pow(double{kBeta1}, t));
    launcher_.Launch(KernelId::kAdam, param.value.ptr, param.grad.ptr, param.m.ptr, param.v.ptr,
                     static_cast<std::int32_t>(param.count), static_cast<float>(lr_t), kBeta1,
                     kBeta2, kEps);
  }
}

void Model::DropGrads() {
  for (Param& param : params_) alloc_.Free(param.grad);
}

void Model::Release() {
  for (Param& param : params_) {
    alloc_.Free(param.grad);
    alloc_.Free(param.value);
    alloc_.Free(param.m);
    alloc_.Free(param.v);
  }
}

}  // namespace chameleon::train_sim
