// Paths and environment shared by the shim's integration tests.
#pragma once

#include <unistd.h>

#include <map>
#include <string>

namespace shim_test {

/// Environment for a workload run under the shim; `socket` is the daemon socket to use.
inline std::map<std::string, std::string> ShimEnv(const std::string& socket) {
  return {
      {"LD_PRELOAD", CHAMELEON_SHIM_PATH},
      {"LD_LIBRARY_PATH", CHAMELEON_SIMGPU_DIR},
      {"CHAMELEON_SOCKET", socket},
      // Tests want records from the very first op: wait for WELCOME at start-up (default 5 ms).
      {"CHAMELEON_CONNECT_TIMEOUT_MS", "3000"},
      {"CHAMELEON_RETRY_MS", "20"},
      {"CHAMELEON_LOG_LEVEL", "warn"},
  };
}

/// Environment for the same workload without the shim.
inline std::map<std::string, std::string> PlainEnv() {
  return {{"LD_PRELOAD", ""}, {"LD_LIBRARY_PATH", CHAMELEON_SIMGPU_DIR}};
}

/// A socket path unique to this test process.
inline std::string SocketPath(const std::string& tag) {
  return "/tmp/chameleon_shim_test_" + std::to_string(::getpid()) + "_" + tag + ".sock";
}

}  // namespace shim_test
