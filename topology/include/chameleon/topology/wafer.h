// The wafer-scale chip as WATOS models it: a W x H mesh of dies, each with its own DRAM and
// compute, joined to its four neighbours by die-to-die (D2D) links.
//
// Public figures (WATOS, HPCA 2026, hardware table): Config1 48 GB/die, 4.5 TB/s D2D,
// 512 TFLOPS; Config3 70 GB, 4 TB/s, 708 TFLOPS; Config4 96 GB, 3.5 TB/s, 708 TFLOPS; 56 dies.
// Config2 is not public, so there is no preset for it. Our assumptions, not the paper's: the
// 56 dies form a 7 x 8 mesh (width 7, height 8); the D2D figure is the bandwidth of one link in
// one direction; GB means 10^9 bytes; each D2D hop adds 100 ns.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chameleon/topology/topology.h"

namespace chameleon::topology {

struct WaferSpec {
  std::string name;
  int width = 7;                   ///< dies along x
  int height = 8;                  ///< dies along y
  std::uint64_t dram_per_die = 0;  ///< bytes
  double d2d_bandwidth = 0;        ///< bytes/s per link per direction
  double flops_per_die = 0;        ///< peak FLOP/s (dense bf16)
  double d2d_latency = 100e-9;     ///< seconds per hop (our assumption)
  int dies() const { return width * height; }
};

/// The public presets: "config1", "config3", "config4"; nullopt for any other name.
std::optional<WaferSpec> WaferPreset(std::string_view name);
/// Names of the presets, for help texts.
std::vector<std::string> WaferPresetNames();

/// Die index of (x, y): row-major, y * width + x.
inline int DieIndex(const WaferSpec& spec, int x, int y) { return y * spec.width + x; }
inline int DieX(const WaferSpec& spec, int die) { return die % spec.width; }
inline int DieY(const WaferSpec& spec, int die) { return die / spec.width; }
/// Manhattan distance, the hop count of every shortest mesh route.
int ManhattanHops(const WaferSpec& spec, int a, int b);

/// Places "die(x,y)" in DieIndex order, duplex links between mesh neighbours. Finalised.
/// Throws std::invalid_argument on a non-positive size, capacity or bandwidth.
Topology BuildWafer(const WaferSpec& spec);

}  // namespace chameleon::topology
