// Architectures and byte counts of the model-shaped mode, against hand-computed figures and the
// parameter counts the model cards publish.
#include "model_spec.h"

#include <gtest/gtest.h>

#include <string>

namespace chameleon::train_sim {
namespace {

ShapeSpec Shape(const std::string& model, int micro_batch, int seq, int tp, bool sp, bool flash) {
  ShapeSpec s;
  EXPECT_TRUE(FindArchitecture(model, &s.arch)) << model;
  s.layers = s.arch.layers;
  s.micro_batch = micro_batch;
  s.seq = seq;
  s.tp = tp;
  s.sequence_parallel = sp;
  s.flash_attention = flash;
  return s;
}

TEST(ModelSpecTest, ShouldRefuseUnknownArchitectures) {
  Architecture a;
  EXPECT_FALSE(FindArchitecture("gpt5", &a));
}

// Hugging Face's parameter counts of the published checkpoints (model.num_parameters()).
TEST(ModelSpecTest, ShouldMatchPublishedParameterCounts) {
  EXPECT_EQ(TotalParameters(Shape("gpt2-xl", 1, 1024, 1, false, true)), 1557611200.0);
  EXPECT_EQ(TotalParameters(Shape("llama2-7b", 1, 4096, 1, false, true)), 6738415616.0);
  EXPECT_EQ(TotalParameters(Shape("llama2-13b", 1, 4096, 1, false, true)), 13015864320.0);
  EXPECT_EQ(TotalParameters(Shape("llama3-8b", 1, 4096, 1, false, true)), 8030261248.0);
}

// Korthikanti et al. 2022, eq. (1): sbh(34 + 5as/h) bytes per layer; s = 1024, b = 2,
// h = 1600, a = 25: 34 * 2048 * 1600 = 111,411,200 and 5 * 25 * 1024^2 * 2 = 262,144,000.
TEST(ModelSpecTest, ShouldStoreKorthikantiActivationsForGpt2) {
  EXPECT_EQ(ActivationBytesPerLayer(Shape("gpt2-xl", 2, 1024, 1, false, true)), 111411200u);
  EXPECT_EQ(ActivationBytesPerLayer(Shape("gpt2-xl", 2, 1024, 1, false, false)),
            111411200u + 262144000u);
}

// Tensor parallelism t = 5 (25 heads), s = 1000, b = 2 (so that s·b divides by 5): with sequence
// parallelism everything is split, sbh(34 + 5as/h) / t (eq. 5); without it
// sbh(10 + 24/t + 5as/(ht)) (eq. 2). sbh = 3,200,000 and as²b = 50,000,000: 71,760,000 and
// 32,000,000 + 15,360,000 + 50,000,000.
TEST(ModelSpecTest, ShouldSplitActivationsUnderTensorAndSequenceParallelism) {
  EXPECT_EQ(ActivationBytesPerLayer(Shape("gpt2-xl", 2, 1000, 5, true, false)), 71760000u);
  EXPECT_EQ(ActivationBytesPerLayer(Shape("gpt2-xl", 2, 1000, 5, false, false)), 97360000u);
}

// Llama 2 7B, s = 4096, b = 1, flash: no dropout masks; eight [s, h] bf16 tensors (x_in, norm1,
// q, k, v, context, x_mid, norm2) = 16sbh, fused gate+up 4sbf and the SwiGLU output 2sbf.
TEST(ModelSpecTest, ShouldStoreSwigluActivationsForLlama) {
  const std::size_t s = 4096, h = 4096, f = 11008;
  EXPECT_EQ(ActivationBytesPerLayer(Shape("llama2-7b", 1, 4096, 1, false, true)),
            16 * s * h + 6 * s * f);
  // Llama 3's grouped-query attention: k and v have 8 heads of 128, not 32.
  EXPECT_EQ(ActivationBytesPerLayer(Shape("llama3-8b", 1, 4096, 1, false, true)),
            12 * s * h + 4 * s * 1024 + 6 * s * 14336);
}

TEST(ModelSpecTest, ShouldListTheKorthikantiTensorsSeparately) {
  const auto saved = SavedPerLayer(Shape("gpt2-xl", 1, 1024, 1, false, true));
  ASSERT_EQ(saved.size(), 12u);  // x_in norm1 q k v context mask x_mid norm2 fc1 act mask
  EXPECT_EQ(std::string(saved.front().name), "x_in");
  EXPECT_EQ(saved[9].bytes, 2u * 1024 * 6400);  // fc1 output: 8sbh
}

// PaLM's model FLOPs: 6 N tokens + 12 L s h tokens; N without the (untied) input embedding.
TEST(ModelSpecTest, ShouldCountModelFlopsLikeMfuFigures) {
  const ShapeSpec s = Shape("llama2-7b", 1, 4096, 1, false, true);
  const double n = 6738415616.0 - 32000.0 * 4096;
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(s), (6 * n + 12.0 * 32 * 4096 * 4096) * 4096);
  ShapeSpec tp2 = s;
  tp2.tp = 2;
  EXPECT_DOUBLE_EQ(ModelFlopsPerStep(tp2), ModelFlopsPerStep(s) / 2);
}

}  // namespace
}  // namespace chameleon::train_sim
