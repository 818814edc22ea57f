// Settings read once from the environment at initialisation (never on the hot path).
// Every variable is documented in docs/shim.md. Invalid values are reported and replaced by the
// default; nothing here can fail the host program.
#pragma once

#include <cstdint>
#include <string>

namespace chameleon::shim {

struct Config {
  bool disabled = false;                      ///< CHAMELEON_DISABLE=1: pure pass-through
  std::string real_libcuda = "libcuda.so.1";  ///< CHAMELEON_REAL_LIBCUDA
  std::string socket_path;              ///< CHAMELEON_SOCKET (default ipc::kDefaultSocketPath)
  int connect_timeout_ms = 5;           ///< CHAMELEON_CONNECT_TIMEOUT_MS: first, synchronous try
  int retry_max_ms = 2000;              ///< CHAMELEON_RETRY_MS: longest background retry interval
  std::uint64_t ring_bytes = 4u << 20;  ///< CHAMELEON_RING_BYTES (power of two)
  bool debug_seqchange = false;         ///< CHAMELEON_DEBUG contains "seqchange"
  bool debug_stats = false;             ///< CHAMELEON_DEBUG contains "stats": summary at exit
  std::string stats_file;               ///< CHAMELEON_STATS_FILE: executor records (JSON lines)
  bool telemetry = true;                ///< CHAMELEON_TELEMETRY=0 keeps only the tracking
  // --- swap executor (docs/shim.md, "Swap executor") ---
  std::uint64_t device_limit_bytes = 0;  ///< CHAMELEON_DEVICE_LIMIT (0 = not set or invalid)
  bool swap_policy = true;               ///< CHAMELEON_SWAP_POLICY=off: safety net only
  bool pointer_scan = true;              ///< CHAMELEON_POINTER_SCAN=off: no pointer-table scan
  /// CHAMELEON_EVICTION=belady|closest-size: the safety net's victim rule (docs/executor.md).
  bool eviction_closest_size = false;
  /// CHAMELEON_PLACEMENT=auto|host: `host` keeps every swapped byte in local host memory, whatever
  /// the policy's tiers and leases say (docs/executor.md, "Destinations").
  bool placement_host = false;
  std::uint64_t host_pool_bytes = 0;   ///< CHAMELEON_HOST_POOL_BYTES (0 = half the host memory)
  std::string topology_path;           ///< CHAMELEON_TOPOLOGY: machine YAML (host_numa_bytes)
  std::uint64_t swap_chunk_bytes = 0;  ///< CHAMELEON_SWAP_CHUNK_BYTES (0 = VMM granularity)
  std::uint64_t swap_min_bytes = 2u << 20;  ///< CHAMELEON_SWAP_MIN_BYTES: smaller ones pass through
};

/// Reads the environment (getenv: init only).
Config LoadConfig();

/// Parses a non-negative decimal integer with an upper bound; false on anything else.
bool ParseBoundedInt(const char* text, std::uint64_t max, std::uint64_t* out);

/// Parses a byte size by the one grammar (chameleon/ipc/byte_size.h: "8GiB" = 2^33, "8G" = "8GB"
/// = 8 * 10^9) and requires it to be positive. False (and `*out` untouched) on null, on anything
/// the grammar rejects and on 0.
bool ParsePositiveByteSize(const char* text, std::uint64_t* out);

}  // namespace chameleon::shim
