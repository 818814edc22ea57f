// The node's host memory per NUMA node, from the one place that knows it: the machine YAML
// (CHAMELEON_TOPOLOGY, the schema SIMGPU_TOPOLOGY shares: key `host_numa_bytes`), else sysfs
// (/sys/devices/system/node/node<N>/meminfo, MemTotal), else this machine's physical RAM with a
// warning. The shim caps its pinned host pool from it and the daemon reports it, so a simulated
// H200 node is not silently limited to the build machine's RAM.
//
// Dependency-free (no yaml-cpp): the shim, a guest in every CUDA process, links this, and Debian
// ships yaml-cpp only as a shared library (which drags libstdc++.so into the host program) or as a
// non-PIC archive. So `host_numa_bytes` is read by a strict reader of one YAML form (below) that
// simgpu uses too, so that both sides agree on every file. Thread-safe (pure functions, except
// for the file reads).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chameleon::topology {

/// Where a HostMemory came from.
enum class HostMemorySource { kTopologyFile, kSysfs, kPhysicalRam };

/// Host DRAM per NUMA node (index = node id). Plain value type.
struct HostMemory {
  std::vector<std::uint64_t> numa_bytes;  ///< one entry per NUMA node, all > 0
  HostMemorySource source = HostMemorySource::kPhysicalRam;
  /// Non-empty when a source was set but unusable (a bad CHAMELEON_TOPOLOGY, no sysfs): the
  /// reason, one line, for the caller to log. The result is then the next source's.
  std::string warning;

  std::uint64_t total() const;
};

/// Where ReadHostMemory looks. Tests inject both.
struct HostMemoryOptions {
  std::string topology_path;                                 ///< CHAMELEON_TOPOLOGY ("" = not set)
  std::string sysfs_node_root = "/sys/devices/system/node";  ///< holds node<N>/meminfo
};

/// Reads the key `host_numa_bytes` of a machine YAML document. Accepted forms, at column 0:
///   host_numa_bytes: [1TiB, 1TiB]        # flow list on one line
///   host_numa_bytes:                      # or a block list, one item per indented line
///     - 1TiB
/// Items are byte sizes by the one grammar (chameleon/ipc/byte_size.h), optionally quoted, each
/// > 0; at most 64 nodes. Returns "" and sets `*present` (false when the key is absent, `out`
/// then untouched); else a one-line reason.
std::string ParseHostNumaBytes(std::string_view yaml_text, std::vector<std::uint64_t>* out,
                               bool* present);

/// Reads MemTotal of every `<root>/node<N>/meminfo` (N from 0 up to the first missing node).
/// Returns "" on success with one entry per node, else a reason (no node0, malformed file).
std::string ReadSysfsNodeMemory(const std::string& root, std::vector<std::uint64_t>* out);

/// The resolution order above. Never fails: the last source is sysconf(_SC_PHYS_PAGES) as one
/// node (8 GiB if even that is unknown), with `warning` saying so.
HostMemory ReadHostMemory(const HostMemoryOptions& options);

/// "topology file", "sysfs" or "physical RAM".
const char* HostMemorySourceName(HostMemorySource source);

}  // namespace chameleon::topology
