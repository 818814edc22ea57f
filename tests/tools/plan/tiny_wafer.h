// Small planning instances whose numbers are easy to follow by hand: a dense layer with
// s = b·s = 1000 tokens, h = 1000, FFN 4000, one head, no vocabulary, 1 layer per stage.
#pragma once

#include "chameleon/topology/wafer.h"
#include "model.h"

namespace chameleon::plan::testing {

inline ModelSpec TinyModel(int layers, int micro_batches) {
  ModelSpec m;
  m.name = "tiny";
  m.layers = layers;
  m.hidden = 1000;
  m.ffn = 4000;
  m.heads = 1;
  m.kv_heads = 1;
  m.vocab = 0;
  m.seq = 1000;
  m.micro_batch = 1;
  m.micro_batches = micro_batches;
  return m;
}

/// `width` x `height` dies, 1 GB/s links, 1 TFLOP/s per die.
inline topology::WaferSpec TinyWafer(int width, int height, std::uint64_t dram) {
  topology::WaferSpec w{"tiny", width, height, dram, 1e9, 1e12};
  return w;
}

}  // namespace chameleon::plan::testing
