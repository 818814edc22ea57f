// Backward and optimizer kernels. Gradients of weights are written (not accumulated): each weight
// is used once per step, and gradients are allocated fresh every step (zero_grad(set_to_none)).
#include <cblas.h>

#include <cmath>
#include <cstddef>

#include "kernel_args.h"
#include "kernels.h"

namespace chameleon::train_sim::kernels {

void EmbedBwd(void* const* p, const simgpu::LaunchDims&) {
  const std::int32_t* tokens = I32(p, 0);
  const float* dout = F32(p, 1);
  float* dwte = F32(p, 2);
  float* dwpe = F32(p, 3);
  const std::size_t rows = Int(p, 4), seq = Int(p, 5), hidden = Int(p, 6), vocab = Int(p, 7);
  for (std::size_t i = 0; i < vocab * hidden; ++i) dwte[i] = 0.f;
  for (std::size_t i = 0; i < seq * hidden; ++i) dwpe[i] = 0.f;
  for (std::size_t r = 0; r < rows; ++r) {
    float* te = dwte + static_cast<std::size_t>(tokens[r]) * hidden;
    float* pe = dwpe + (r % seq) * hidden;
    const float* d = dout + r * hidden;
    for (std::size_t h = 0; h < hidden; ++h) {
      te[h] += d[h];
      pe[h] += d[h];
    }
  }
}

// dx (+)= rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)), dxhat = dout * gamma.
void LayerNormBwd(void* const* p, const simgpu::LaunchDims&) {
  const float* dout = F32(p, 0);
  const float* x = F32(p, 1);
  const float* stats = F32(p, 2);
  const float* gamma = F32(p, 3);
  float* dx = F32(p, 4);
  float* dgamma = F32(p, 5);
  float* dbeta = F32(p, 6);
  const std::size_t rows = Int(p, 7), hidden = Int(p, 8);
  const bool accumulate = Int(p, 9) != 0;
  for (std::size_t h = 0; h < hidden; ++h) dgamma[h] = dbeta[h] = 0.f;
  const float inv_h = 1.f / static_cast<float>(hidden);
  for (std::size_t r = 0; r < rows; ++r) {
    const float mean = stats[r], rstd = stats[rows + r];
    const float* xr = x + r * hidden;
    const float* dr = dout + r * hidden;
    float sum_dxhat = 0.f, sum_dxhat_xhat = 0.f;
    for (std::size_t h = 0; h < hidden; ++h) {
      const float xhat = (xr[h] - mean) * rstd;
      const float dxhat = dr[h] * gamma[h];
      sum_dxhat += dxhat;
      sum_dxhat_xhat += dxhat * xhat;
      dgamma[h] += dr[h] * xhat;
      dbeta[h] += dr[h];
    }
    float* o = dx + r * hidden;
    for (std::size_t h = 0; h < hidden; ++h) {
      const float xhat = (xr[h] - mean) * rstd;
      const float v = rstd * (dr[h] * gamma[h] - sum_dxhat * inv_h - xhat * sum_dxhat_xhat * inv_h);
      o[h] = accumulate ? o[h] + v : v;
    }
  }
}

void LinearBwdInput(void* const* p, const simgpu::LaunchDims&) {
  const float* dout = F32(p, 0);
  const float* w = F32(p, 1);
  float* din = F32(p, 2);
  const int rows = Int(p, 3), in_dim = Int(p, 4), out_dim = Int(p, 5);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, in_dim, out_dim, 1.f, dout, out_dim, w,
              out_dim, 0.f, din, in_dim);
}

void LinearBwdWeight(void* const* p, const simgpu::LaunchDims&) {
  const float* in = F32(p, 0);
  const float* dout = F32(p, 1);
  float* dw = F32(p, 2);
  float* dbias = F32(p, 3);
  const int rows = Int(p, 4), in_dim = Int(p, 5), out_dim = Int(p, 6);
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in_dim, out_dim, rows, 1.f, in, in_dim, dout,
              out_dim, 0.f, dw, out_dim);
  if (dbias == nullptr) return;
  for (int o = 0; o < out_dim; ++o) dbias[o] = 0.f;
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    for (int o = 0; o < out_dim; ++o) dbias[o] += dout[r * out_dim + o];
  }
}

// For each (batch, head): dP = dO V^T, dV = P^T dO, dS = P * (dP - rowsum(P * dP)),
// dQ = scale * dS K, dK = scale * dS^T Q. scratch holds one (S x S) dP/dS matrix.
void AttentionBwd(void* const* p, const simgpu::LaunchDims&) {
  const float* dout = F32(p, 0);
  const float* qkv = F32(p, 1);
  const float* probs = F32(p, 2);
  float* dqkv = F32(p, 3);
  float* ds = F32(p, 4);
  const int batch = Int(p, 5), seq = Int(p, 6), heads = Int(p, 7), head_dim = Int(p, 8);
  const int hidden = heads * head_dim, ld = 3 * hidden;
  const float scale = 1.f / std::sqrt(static_cast<float>(head_dim));
  const std::size_t s = seq;
  for (int b = 0; b < batch; ++b) {
    for (int h = 0; h < heads; ++h) {
      const std::size_t base = b * s * ld + h * head_dim;
      const float *q = qkv + base, *k = q + hidden, *v = q + 2 * hidden;
      float *dq = dqkv + base, *dk = dq + hidden, *dv = dq + 2 * hidden;
      const float* d_o = dout + b * s * hidden + h * head_dim;
      const float* pr = probs + (static_cast<std::size_t>(b) * heads + h) * s * s;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, seq, seq, head_dim, 1.f, d_o, hidden, v,
                  ld, 0.f, ds, seq);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, seq, head_dim, seq, 1.f, pr, seq, d_o,
                  hidden, 0.f, dv, ld);
      for (std::size_t i = 0; i < s; ++i) {
        float dot = 0.f;
        for (std::size_t j = 0; j <= i; ++j) dot += pr[i * s + j] * ds[i * s + j];
        for (std::size_t j = 0; j < s; ++j) ds[i * s + j] = pr[i * s + j] * (ds[i * s + j] - dot);
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, seq, head_dim, seq, scale, ds, seq, k,
                  ld, 0.f, dq, ld);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, seq, head_dim, seq, scale, ds, seq, q,
                  ld, 0.f, dk, ld);
    }
  }
}

// dlogits = (softmax(logits) - onehot(target)) / rows: the gradient of the mean loss.
void CrossEntropyBwd(void* const* p, const simgpu::LaunchDims&) {
  const float* logits = F32(p, 0);
  const std::int32_t* targets = I32(p, 1);
  float* dlogits = F32(p, 2);
  const std::size_t rows = Int(p, 3), vocab = Int(p, 4);
  const float inv_rows = 1.f / static_cast<float>(rows);
  for (std::size_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    float* d = dlogits + r * vocab;
    float max = row[0];
    for (std::size_t v = 1; v < vocab; ++v) max = (row[v] > max ? row[v] : max);
    float sum = 0.f;
    for (std::size_t v = 0; v < vocab; ++v) {
      d[v] = std::exp(row[v] - max);
      sum += d[v];
    }
    const float inv = 1.f / sum;
    for (std::size_t v = 0; v < vocab; ++v) d[v] = d[v] * inv * inv_rows;
    d[targets[r]] -= inv_rows;
  }
}

void SquareLossBwd(void* const* p, const simgpu::LaunchDims&) {
  const float* x = F32(p, 0);
  float* dx = F32(p, 1);
  const std::size_t n = Int(p, 2);
  const float factor = 2.f * Float(p, 3) / static_cast<float>(n);
  for (std::size_t i = 0; i < n; ++i) dx[i] = factor * x[i];
}

// lr_t already carries Adam's bias correction (computed on the host per parameter).
void Adam(void* const* p, const simgpu::LaunchDims&) {
  float* param = F32(p, 0);
  const float* grad = F32(p, 1);
  float* m = F32(p, 2);
  float* v = F32(p, 3);
  const std::size_t n = Int(p, 4);
  const float lr_t = Float(p, 5), beta1 = Float(p, 6), beta2 = Float(p, 7), eps = Float(p, 8);
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = beta1 * m[i] + (1.f - beta1) * grad[i];
    v[i] = beta2 * v[i] + (1.f - beta2) * grad[i] * grad[i];
    param[i] -= lr_t * m[i] / (std::sqrt(v[i]) + eps);
  }
}

}  // namespace chameleon::train_sim::kernels
