// YAML descriptions of topologies, one schema for wafers and nodes.
//
//   wafer:                      # a mesh; every key optional except dram/d2d/flops
//     name: mywafer
//     width: 7
//     height: 8
//     dram_per_die_gb: 48       # 10^9 bytes
//     d2d_tb_per_s: 4.5         # per link per direction
//     tflops_per_die: 512
//     preset: config1           # start from a preset, then override the keys given
//
//   places:                     # a node: any graph
//     - {name: gpu0, kind: gpu, capacity_gb: 141, tflops: 989}
//     - {name: numa0, kind: numa, capacity_gb: 1024}
//   links:                      # gb_per_s one way; duplex: true adds the reverse too
//     - {from: gpu0, to: numa0, gb_per_s: 46.8, latency_us: 1, duplex: true}
#pragma once

#include <string>
#include <variant>

#include "chameleon/topology/topology.h"
#include "chameleon/topology/wafer.h"

namespace chameleon::topology {

/// Either a wafer description or a general (finalised) topology.
using TopologyDescription = std::variant<WaferSpec, Topology>;

/// Parses YAML text. Throws std::runtime_error naming the offending key.
TopologyDescription ParseTopologyYaml(const std::string& text);
/// Reads and parses a file. Throws std::runtime_error with the path on failure.
TopologyDescription LoadTopologyYaml(const std::string& path);

}  // namespace chameleon::topology
