// What chameleon-probe measured, as plain data: the table and the YAML are both made from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "host_buffer.h"

namespace chameleon::probe {

/// Median and p99 (nearest rank) of `samples`; {0, 0} when empty.
struct Spread {
  double median = 0;
  double p99 = 0;
};
Spread SpreadOf(std::vector<double> samples);

/// One device against pinned memory on one NUMA node. Bandwidths in bytes/s (median).
struct HostLinkFigure {
  int device = 0;
  int numa_node = -1;  ///< -1: no node known
  Binding binding = Binding::kUnbound;
  double host_to_device = 0;
  double device_to_host = 0;
};

/// One directed device pair, bytes/s (median). Without peer access the copy is staged by the
/// driver through host memory and no peer link is reported for it.
struct PeerFigure {
  int from = 0;
  int to = 0;
  bool peer_access = false;
  double bandwidth = 0;
};

/// Wall-clock latency of one VMM call, microseconds.
struct LatencyFigure {
  std::string call;
  Spread micros;
};

struct ProbeFigures {
  std::string device_name;
  int device_count = 0;
  std::vector<int> numa_of_device;  ///< every device of the machine, -1 when unknown
  std::vector<int> devices;         ///< the devices measured
  std::uint64_t bytes = 0;
  int trials = 0;
  std::size_t vmm_chunk_bytes = 0;
  std::vector<HostLinkFigure> host;
  std::vector<PeerFigure> peer;
  std::vector<LatencyFigure> vmm;
};

}  // namespace chameleon::probe
