#include "chameleon/topology/wafer.h"

#include <cstdlib>
#include <stdexcept>

namespace chameleon::topology {
namespace {

constexpr double kTera = 1e12;
constexpr std::uint64_t kGB = 1'000'000'000ULL;

WaferSpec Config(const char* name, std::uint64_t gb, double d2d_tb, double tflops) {
  WaferSpec spec;
  spec.name = name;
  spec.dram_per_die = gb * kGB;
  spec.d2d_bandwidth = d2d_tb * kTera;
  spec.flops_per_die = tflops * kTera;
  return spec;
}

}  // namespace

std::optional<WaferSpec> WaferPreset(std::string_view name) {
  if (name == "config1") return Config("config1", 48, 4.5, 512);
  if (name == "config3") return Config("config3", 70, 4.0, 708);
  if (name == "config4") return Config("config4", 96, 3.5, 708);
  return std::nullopt;
}

std::vector<std::string> WaferPresetNames() { return {"config1", "config3", "config4"}; }

int ManhattanHops(const WaferSpec& spec, int a, int b) {
  return std::abs(DieX(spec, a) - DieX(spec, b)) + std::abs(DieY(spec, a) - DieY(spec, b));
}

Topology BuildWafer(const WaferSpec& spec) {
  if (spec.width <= 0 || spec.height <= 0 || spec.dram_per_die == 0 || !(spec.d2d_bandwidth > 0) ||
      spec.flops_per_die < 0) {
    throw std::invalid_argument("wafer '" + spec.name +
                                "': width, height, DRAM and D2D bandwidth must be positive");
  }
  Topology topo;
  for (int y = 0; y < spec.height; ++y) {
    for (int x = 0; x < spec.width; ++x) {
      topo.AddPlace(Place{"die(" + std::to_string(x) + "," + std::to_string(y) + ")",
                          PlaceKind::kDie, spec.dram_per_die, spec.flops_per_die});
    }
  }
  for (int y = 0; y < spec.height; ++y) {
    for (int x = 0; x < spec.width; ++x) {
      const int here = DieIndex(spec, x, y);
      if (x + 1 < spec.width) {
        topo.AddDuplex(here, DieIndex(spec, x + 1, y), spec.d2d_bandwidth, spec.d2d_latency);
      }
      if (y + 1 < spec.height) {
        topo.AddDuplex(here, DieIndex(spec, x, y + 1), spec.d2d_bandwidth, spec.d2d_latency);
      }
    }
  }
  topo.Finalize();
  return topo;
}

}  // namespace chameleon::topology
