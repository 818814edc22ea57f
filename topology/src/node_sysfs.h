// What sysfs says about a node beyond its memory (host_memory.h reads that): the NUMA distance
// rows (/sys/devices/system/node/node<N>/distance) and a PCI device's NUMA node
// (/sys/bus/pci/devices/<bus id>/numa_node). Internal to topology/; thread-safe (file reads only).
#pragma once

#include <string>
#include <vector>

namespace chameleon::topology::detail {

/// The distance row of each of `count` nodes under `root`: `(*out)[i][j]` is the kernel's
/// SLIT distance (10 = local). Returns "" or a reason (missing file, wrong length, a value
/// outside 10..254); `out` is then untouched.
std::string ReadNumaDistances(const std::string& root, std::size_t count,
                              std::vector<std::vector<int>>* out);

/// The NUMA node of PCI device `bus_id` under `pci_root`, or -1 (no file, "-1", malformed).
int ReadPciNumaNode(const std::string& pci_root, const std::string& bus_id);

/// 10 on the diagonal, 21 (the kernel's default remote distance) elsewhere.
std::vector<std::vector<int>> DefaultNumaDistances(std::size_t count);

}  // namespace chameleon::topology::detail
