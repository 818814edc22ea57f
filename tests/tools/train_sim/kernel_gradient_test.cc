// The trainer's backward kernels against finite differences of its forward kernels. Kernels are
// plain host functions, so they are called directly on host buffers (no driver involved).
#include <cuda.h>
#include <gtest/gtest.h>

#include <array>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels.h"

namespace chameleon::train_sim {
namespace {

using Vec = std::vector<float>;

/// Packs kernel arguments the way cuLaunchKernel's kernelParams presents them.
class Args {
 public:
  Args& Ptr(const void* p) {
    return Push(static_cast<CUdeviceptr>(reinterpret_cast<std::uintptr_t>(p)));
  }
  Args& Int(std::int32_t v) { return Push(v); }
  Args& Float(float v) { return Push(v); }
  void* const* params() {
    pointers_.clear();
    for (auto& slot : slots_) pointers_.push_back(slot.data());
    return pointers_.data();
  }

 private:
  template <class T>
  Args& Push(T v) {
    std::array<unsigned char, 8> slot{};
    std::memcpy(slot.data(), &v, sizeof(T));
    slots_.push_back(slot);
    return *this;
  }
  std::vector<std::array<unsigned char, 8>> slots_;
  std::vector<void*> pointers_;
};

Vec Random(std::size_t n, std::uint32_t seed, float scale = 1.f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  Vec v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

double Dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// Checks analytic[i] against the central difference of objective() for a few elements of x.
void ExpectGradient(Vec& x, const Vec& analytic, const std::function<double()>& objective,
                    const char* what) {
  const float eps = 1e-2f;
  const std::size_t stride = x.size() > 40 ? x.size() / 23 : 1;
  for (std::size_t i = 0; i < x.size(); i += stride) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double plus = objective();
    x[i] = saved - eps;
    const double minus = objective();
    x[i] = saved;
    const double numeric = (plus - minus) / (2.0 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-2 * std::max(1.0, std::fabs(numeric)))
        << what << "[" << i << "]";
  }
}

TEST(KernelGradientTest, LayerNormMatchesFiniteDifferences) {
  const int rows = 3, hidden = 8;
  Vec x = Random(rows * hidden, 1), gamma = Random(hidden, 2), beta = Random(hidden, 3);
  const Vec r = Random(rows * hidden, 4);
  Vec out(rows * hidden), stats(2 * rows);
  auto objective = [&] {
    Args a;
    a.Ptr(x.data()).Ptr(gamma.data()).Ptr(beta.data()).Ptr(out.data()).Ptr(stats.data());
    a.Int(rows).Int(hidden);
    kernels::LayerNormFwd(a.params(), {});
    return Dot(out, r);
  };
  objective();
  Vec dx(rows * hidden, 0.5f), dgamma(hidden), dbeta(hidden);
  Args b;
  b.Ptr(r.data()).Ptr(x.data()).Ptr(stats.data()).Ptr(gamma.data()).Ptr(dx.data());
  b.Ptr(dgamma.data()).Ptr(dbeta.data()).Int(rows).Int(hidden).Int(1);
  kernels::LayerNormBwd(b.params(), {});
  for (float& v : dx) v -= 0.5f;  // accumulate = 1 added onto 0.5
  ExpectGradient(x, dx, objective, "dx");
  ExpectGradient(gamma, dgamma, objective, "dgamma");
  ExpectGradient(beta, dbeta, objective, "dbeta");
}

TEST(KernelGradientTest, LinearMatchesFiniteDifferences) {
  const int rows = 4, in = 5, out_dim = 3;
  Vec x = Random(rows * in, 1), w = Random(in * out_dim, 2), bias = Random(out_dim, 3);
  const Vec r = Random(rows * out_dim, 4);
  Vec out(rows * out_dim);
  auto objective = [&] {
    Args a;
    a.Ptr(x.data()).Ptr(w.data()).Ptr(bias.data()).Ptr(out.data());
    a.Int(rows).Int(in).Int(out_dim);
    kernels::LinearFwd(a.params(), {});
    return Dot(out, r);
  };
  Vec dx(rows * in), dw(in * out_dim), db(out_dim);
  Args bi;
  bi.Ptr(r.data()).Ptr(w.data()).Ptr(dx.data()).Int(rows).Int(in).Int(out_dim);
  kernels::LinearBwdInput(bi.params(), {});
  Args bw;
  bw.Ptr(x.data()).Ptr(r.data()).Ptr(dw.data()).Ptr(db.data()).Int(rows).Int(in).Int(out_dim);
  kernels::LinearBwdWeight(bw.params(), {});
  ExpectGradient(x, dx, objective, "dx");
  ExpectGradient(w, dw, objective, "dw");
  ExpectGradient(bias, db, objective, "dbias");
}

TEST(KernelGradientTest, CausalAttentionMatchesFiniteDifferences) {
  const int batch = 2, seq = 5, heads = 2, head_dim = 3, hidden = heads * head_dim;
  Vec qkv = Random(batch * seq * 3 * hidden, 1);
  const Vec r = Random(batch * seq * hidden, 2);
  Vec probs(batch * heads * seq * seq), out(batch * seq * hidden);
  auto objective = [&] {
    Args a;
    a.Ptr(qkv.data()).Ptr(probs.data()).Ptr(out.data());
    a.Int(batch).Int(seq).Int(heads).Int(head_dim);
    kernels::AttentionFwd(a.params(), {});
    return Dot(out, r);
  };
  objective();
  // Causality: the first position of each sequence attends only to itself.
  EXPECT_FLOAT_EQ(probs[0], 1.f);
  EXPECT_FLOAT_EQ(probs[1], 0.f);
  Vec dqkv(qkv.size()), scratch(seq * seq);
  Args b;
  b.Ptr(r.data()).Ptr(qkv.data()).Ptr(probs.data()).Ptr(dqkv.data()).Ptr(scratch.data());
  b.Int(batch).Int(seq).Int(heads).Int(head_dim);
  kernels::AttentionBwd(b.params(), {});
  ExpectGradient(qkv, dqkv, objective, "dqkv");
}

TEST(KernelGradientTest, GeluMatchesFiniteDifferences) {
  const int n = 16;
  Vec x = Random(n, 1, 3.f);
  const Vec r = Random(n, 2);
  Vec out(n);
  auto objective = [&] {
    Args a;
    a.Ptr(x.data()).Ptr(out.data()).Int(n);
    kernels::GeluFwd(a.params(), {});
    return Dot(out, r);
  };
  Vec dx(n);
  Args b;
  b.Ptr(x.data()).Ptr(r.data()).Ptr(dx.data()).Int(n);
  kernels::GeluBwd(b.params(), {});
  ExpectGradient(x, dx, objective, "dx");
}

TEST(KernelGradientTest, CrossEntropyMatchesFiniteDifferences) {
  const int rows = 3, vocab = 7;
  Vec logits = Random(rows * vocab, 1, 2.f);
  const std::vector<std::int32_t> targets = {0, 6, 3};
  Vec loss(1);
  auto objective = [&] {
    Args a;
    a.Ptr(logits.data()).Ptr(targets.data()).Ptr(loss.data()).Int(rows).Int(vocab);
    kernels::CrossEntropyFwd(a.params(), {});
    return static_cast<double>(loss[0]);
  };
  EXPECT_GT(objective(), 0.0);
  Vec dlogits(rows * vocab);
  Args b;
  b.Ptr(logits.data()).Ptr(targets.data()).Ptr(dlogits.data()).Int(rows).Int(vocab);
  kernels::CrossEntropyBwd(b.params(), {});
  ExpectGradient(logits, dlogits, objective, "dlogits");
}

TEST(KernelGradientTest, EmbeddingAndSquareLossMatchFiniteDifferences) {
  const int rows = 6, seq = 3, hidden = 4, vocab = 5;
  const std::vector<std::int32_t> tokens = {1, 4, 1, 0, 2, 4};
  Vec wte = Random(vocab * hidden, 1), wpe = Random(seq * hidden, 2);
  Vec out(rows * hidden), loss(1);
  const float weight = 0.3f;
  auto objective = [&] {
    Args a;
    a.Ptr(tokens.data()).Ptr(wte.data()).Ptr(wpe.data()).Ptr(out.data());
    a.Int(rows).Int(seq).Int(hidden);
    kernels::EmbedFwd(a.params(), {});
    loss[0] = 0.f;
    Args s;
    s.Ptr(out.data()).Ptr(loss.data()).Int(rows * hidden).Float(weight);
    kernels::SquareLossFwd(s.params(), {});
    return static_cast<double>(loss[0]);
  };
  objective();
  Vec dout(rows * hidden), dwte(vocab * hidden, 9.f), dwpe(seq * hidden, 9.f);
  Args s;
  s.Ptr(out.data()).Ptr(dout.data()).Int(rows * hidden).Float(weight);
  kernels::SquareLossBwd(s.params(), {});
  Args b;
  b.Ptr(tokens.data()).Ptr(dout.data()).Ptr(dwte.data()).Ptr(dwpe.data());
  b.Int(rows).Int(seq).Int(hidden).Int(vocab);
  kernels::EmbedBwd(b.params(), {});
  ExpectGradient(wte, dwte, objective, "dwte");
  ExpectGradient(wpe, dwpe, objective, "dwpe");
}

TEST(KernelGradientTest, AdamStepMatchesTheUpdateRule) {
  Vec param = {1.f, -2.f}, grad = {0.5f, -0.25f}, m = {0.f, 0.1f}, v = {0.f, 0.01f};
  Args a;
  a.Ptr(param.data()).Ptr(grad.data()).Ptr(m.data()).Ptr(v.data()).Int(2);
  a.Float(0.01f).Float(0.9f).Float(0.999f).Float(1e-8f);
  kernels::Adam(a.params(), {});
  const double m1 = 0.9 * 0.1 + 0.1 * -0.25, v1 = 0.999 * 0.01 + 0.001 * 0.0625;
  EXPECT_NEAR(m[1], m1, 1e-6);
  EXPECT_NEAR(v[1], v1, 1e-6);
  EXPECT_NEAR(param[1], -2.0 - 0.01 * m1 / (std::sqrt(v1) + 1e-8), 1e-5);
  EXPECT_NEAR(param[0], 1.0 - 0.01 * (0.05 / (std::sqrt(0.00025) + 1e-8)), 1e-5);
}

}  // namespace
}  // namespace chameleon::train_sim
