// Forward kernels. Reductions run in a fixed order (row by row, left to right) so results do not
// depend on the address a tensor was given: the three allocation styles and --recompute must
// produce bit-identical losses.
#include <cblas.h>

#include <cmath>
#include <cstddef>

#include "kernel_args.h"
#include "kernels.h"

namespace chameleon::train_sim::kernels {
namespace {

constexpr float kLayerNormEps = 1e-5f;
// sqrt(2 / pi), the tanh approximation of GELU used by GPT-2.
constexpr float kGeluC = 0.7978845608028654f;
constexpr float kGeluK = 0.044715f;

}  // namespace

// tanh through expf: glibc's tanhf goes through expm1f and was a fifth of the trainer's time.
float FastTanh(float u) { return 1.f - 2.f / (std::exp(2.f * u) + 1.f); }

// fmax without the libm call (inputs are never NaN here; fmax's NaN rules are not needed).
static inline float Max(float a, float b) { return a > b ? a : b; }

void EmbedFwd(void* const* p, const simgpu::LaunchDims&) {
  const std::int32_t* tokens = I32(p, 0);
  const float* wte = F32(p, 1);
  const float* wpe = F32(p, 2);
  float* out = F32(p, 3);
  const std::size_t rows = Int(p, 4), seq = Int(p, 5), hidden = Int(p, 6);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* te = wte + static_cast<std::size_t>(tokens[r]) * hidden;
    const float* pe = wpe + (r % seq) * hidden;
    float* o = out + r * hidden;
    for (std::size_t h = 0; h < hidden; ++h) o[h] = te[h] + pe[h];
  }
}

void LayerNormFwd(void* const* p, const simgpu::LaunchDims&) {
  const float* x = F32(p, 0);
  const float* gamma = F32(p, 1);
  const float* beta = F32(p, 2);
  float* out = F32(p, 3);
  float* stats = F32(p, 4);  // [mean x rows, rstd x rows]
  const std::size_t rows = Int(p, 5), hidden = Int(p, 6);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* xr = x + r * hidden;
    float sum = 0.f;
    for (std::size_t h = 0; h < hidden; ++h) sum += xr[h];
    const float mean = sum / static_cast<float>(hidden);
    float var = 0.f;
    for (std::size_t h = 0; h < hidden; ++h) var += (xr[h] - mean) * (xr[h] - mean);
    const float rstd = 1.f / std::sqrt(var / static_cast<float>(hidden) + kLayerNormEps);
    float* o = out + r * hidden;
    for (std::size_t h = 0; h < hidden; ++h) o[h] = (xr[h] - mean) * rstd * gamma[h] + beta[h];
    stats[r] = mean;
    stats[rows + r] = rstd;
  }
}

void LinearFwd(void* const* p, const simgpu::LaunchDims&) {
  const float* in = F32(p, 0);
  const float* w = F32(p, 1);
  const float* bias = F32(p, 2);
  float* out = F32(p, 3);
  const int rows = Int(p, 4), in_dim = Int(p, 5), out_dim = Int(p, 6);
  float beta = 0.f;
  if (bias != nullptr) {
    for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
      for (int o = 0; o < out_dim; ++o) out[r * out_dim + o] = bias[o];
    }
    beta = 1.f;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, out_dim, in_dim, 1.f, in, in_dim, w,
              out_dim, beta, out, out_dim);
}

// Causal softmax of one (S x S) score matrix in place; entries above the diagonal become 0.
static void CausalSoftmax(float* scores, std::size_t seq) {
  for (std::size_t i = 0; i < seq; ++i) {
    float* row = scores + i * seq;
    float max = row[0];
    for (std::size_t j = 1; j <= i; ++j) max = Max(max, row[j]);
    float sum = 0.f;
    for (std::size_t j = 0; j <= i; ++j) {
      row[j] = std::exp(row[j] - max);
      sum += row[j];
    }
    const float inv = 1.f / sum;
    for (std::size_t j = 0; j <= i; ++j) row[j] *= inv;
    for (std::size_t j = i + 1; j < seq; ++j) row[j] = 0.f;
  }
}

// qkv is [rows, 3 * hidden] with Q, K, V side by side; head h uses columns h*head_dim.. of each.
// probs [batch, heads, seq, seq] is kept for the backward pass; out is [rows, hidden].
void AttentionFwd(void* const* p, const simgpu::LaunchDims&) {
  const float* qkv = F32(p, 0);
  float* probs = F32(p, 1);
  float* out = F32(p, 2);
  const int batch = Int(p, 3), seq = Int(p, 4), heads = Int(p, 5), head_dim = Int(p, 6);
  const int hidden = heads * head_dim;
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  const std::size_t s = seq;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const float* q = qkv + b * s * 3 * hidden + h * head_dim;
      const float* k = q + hidden;
      const float* v = q + 2 * hidden;
      float* pr = probs + (static_cast<std::size_t>(b) * heads + h) * s * s;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, head_dim, scale, q, 3 * hidden,
                  k, 3 * hidden, 0.f, pr, seq);
      CausalSoftmax(pr, s);
      float* o = out + b * s * hidden + h * head_dim;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, head_dim, seq, 1.f, pr, seq, v,
                  3 * hidden, 0.f, o, hidden);
    }
  }
}

void GeluFwd(void* const* p, const simgpu::LaunchDims&) {
  const float* in = F32(p, 0);
  float* out = F32(p, 1);
  const std::size_t n = Int(p, 2);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = in[i];
    out[i] = 0.5f * x * (1.f + FastTanh(kGeluC * (x + kGeluK * x * x * x)));
  }
}

void GeluBwd(void* const* p, const simgpu::LaunchDims&) {
  const float* in = F32(p, 0);
  const float* dout = F32(p, 1);
  float* din = F32(p, 2);
  const std::size_t n = Int(p, 3);
  for (std::size_t i = 0; i < n; ++i) {
    const float x = in[i];
    const float t = FastTanh(kGeluC * (x + kGeluK * x * x * x));
    const float dt = kGeluC * (1.f + 3.f * kGeluK * x * x) * (1.f - t * t);
    din[i] = dout[i] * (0.5f * (1.f + t) + 0.5f * x * dt);
  }
}

void Add(void* const* p, const simgpu::LaunchDims&) {
  const float* a = F32(p, 0);
  const float* b = F32(p, 1);
  float* out = F32(p, 2);
  const std::size_t n = Int(p, 3);
  for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

void AddInPlace(void* const* p, const simgpu::LaunchDims&) {
  float* acc = F32(p, 0);
  const float* x = F32(p, 1);
  const std::size_t n = Int(p, 2);
  for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
}

// Mean softmax cross-entropy over rows; accumulated in double so the mean of many rows stays
// exact enough to print six decimals.
void CrossEntropyFwd(void* const* p, const simgpu::LaunchDims&) {
  const float* logits = F32(p, 0);
  const std::int32_t* targets = I32(p, 1);
  float* loss = F32(p, 2);
  const std::size_t rows = Int(p, 3), vocab = Int(p, 4);
  double total = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    float max = row[0];
    for (std::size_t v = 1; v < vocab; ++v) max = Max(max, row[v]);
    float sum = 0.f;
    for (std::size_t v = 0; v < vocab; ++v) sum += std::exp(row[v] - max);
    total += static_cast<double>(std::log(sum) + max - row[targets[r]]);
  }
  loss[0] = static_cast<float>(total / static_cast<double>(rows));
}

void SquareLossFwd(void* const* p, const simgpu::LaunchDims&) {
  const float* x = F32(p, 0);
  float* loss = F32(p, 1);
  const std::size_t n = Int(p, 2);
  const float weight = Float(p, 3);
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) total += static_cast<double>(x[i]) * x[i];
  loss[0] += weight * static_cast<float>(total / static_cast<double>(n));
}

void Fill(void* const* p, const simgpu::LaunchDims&) {
  float* out = F32(p, 0);
  const std::size_t n = Int(p, 1);
  const float value = Float(p, 2);
  for (std::size_t i = 0; i < n; ++i) out[i] = value;
}

}  // namespace chameleon::train_sim::kernels
