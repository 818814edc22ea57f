#include "config.h"

#include <cstdlib>
#include <cstring>
#include <string>

#include "chameleon/ipc/byte_size.h"
#include "chameleon/ipc/constants.h"
#include "log.h"

namespace chameleon::shim {

bool ParseBoundedInt(const char* text, std::uint64_t max, std::uint64_t* out) {
  if (text == nullptr || text[0] == '\0') return false;
  std::uint64_t value = 0;
  for (const char* p = text; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return false;
    const auto digit = static_cast<std::uint64_t>(*p - '0');
    if (value > (max - digit) / 10) return false;  // value * 10 + digit > max, without overflow
    value = value * 10 + digit;
  }
  *out = value;
  return true;
}

bool ParsePositiveByteSize(const char* text, std::uint64_t* out) {
  if (text == nullptr) return false;
  const ipc::ByteSize size = ipc::ParseByteSize(text);
  if (!size || size.bytes == 0) return false;
  *out = size.bytes;
  return true;
}

namespace {

void ReadBytes(const char* name, std::uint64_t* field) {
  const char* text = std::getenv(name);
  if (text == nullptr) return;
  std::uint64_t value = 0;
  if (ParsePositiveByteSize(text, &value)) {
    *field = value;
  } else {
    Log(LogLevel::kWarn, "ignoring %s='%s' (expected a size > 0: %s)", name, text,
        ipc::kByteSizeForms);
  }
}

void ReadInt(const char* name, std::uint64_t max, int* field) {
  const char* text = std::getenv(name);
  if (text == nullptr) return;
  std::uint64_t value = 0;
  if (ParseBoundedInt(text, max, &value)) {
    *field = static_cast<int>(value);
  } else {
    Log(LogLevel::kWarn, "ignoring %s='%s' (expected an integer <= %llu)", name, text,
        static_cast<unsigned long long>(max));
  }
}

}  // namespace

Config LoadConfig() {
  Config config;
  ConfigureLog(std::getenv("CHAMELEON_LOG_LEVEL"), std::getenv("CHAMELEON_LOG_FILE"));
  const char* disable = std::getenv("CHAMELEON_DISABLE");
  config.disabled = disable != nullptr && disable[0] != '\0' && std::strcmp(disable, "0") != 0;
  const char* real = std::getenv("CHAMELEON_REAL_LIBCUDA");
  if (real != nullptr && real[0] != '\0') config.real_libcuda = real;
  const char* socket = std::getenv("CHAMELEON_SOCKET");
  config.socket_path = (socket != nullptr && socket[0] != '\0') ? socket : ipc::kDefaultSocketPath;
  ReadInt("CHAMELEON_CONNECT_TIMEOUT_MS", 60000, &config.connect_timeout_ms);
  ReadInt("CHAMELEON_RETRY_MS", 3600000, &config.retry_max_ms);
  if (config.retry_max_ms < 10) config.retry_max_ms = 10;
  if (const char* ring = std::getenv("CHAMELEON_RING_BYTES")) {
    std::uint64_t value = 0;
    if (ParseBoundedInt(ring, 1ull << 30, &value) && value >= 4096 && (value & (value - 1)) == 0) {
      config.ring_bytes = value;
    } else {
      Log(LogLevel::kWarn, "ignoring CHAMELEON_RING_BYTES='%s' (power of two, 4 KiB..1 GiB)", ring);
    }
  }
  const char* debug = std::getenv("CHAMELEON_DEBUG");
  config.debug_seqchange = debug != nullptr && std::strstr(debug, "seqchange") != nullptr;
  config.debug_stats = debug != nullptr && std::strstr(debug, "stats") != nullptr;
  if (const char* stats = std::getenv("CHAMELEON_STATS_FILE")) config.stats_file = stats;
  const char* telemetry = std::getenv("CHAMELEON_TELEMETRY");
  config.telemetry = !(telemetry != nullptr && std::strcmp(telemetry, "0") == 0);
  if (const char* limit = std::getenv("CHAMELEON_DEVICE_LIMIT")) {
    if (!ParsePositiveByteSize(limit, &config.device_limit_bytes)) {
      config.device_limit_bytes = 0;
      Log(LogLevel::kError,
          "CHAMELEON_DEVICE_LIMIT='%s' is not a byte count > 0 (%s): no device limit, swapping "
          "stays off unless a daemon is present",
          limit, ipc::kByteSizeForms);
    }
  }
  if (const char* policy = std::getenv("CHAMELEON_SWAP_POLICY")) {
    if (std::strcmp(policy, "off") == 0 || std::strcmp(policy, "0") == 0) {
      config.swap_policy = false;
    } else if (std::strcmp(policy, "on") != 0 && std::strcmp(policy, "1") != 0) {
      Log(LogLevel::kWarn, "ignoring CHAMELEON_SWAP_POLICY='%s' (expected on or off)", policy);
    }
  }
  if (const char* scan = std::getenv("CHAMELEON_POINTER_SCAN")) {
    if (std::strcmp(scan, "off") == 0 || std::strcmp(scan, "0") == 0) {
      config.pointer_scan = false;
    } else if (std::strcmp(scan, "on") != 0 && std::strcmp(scan, "1") != 0) {
      Log(LogLevel::kWarn, "ignoring CHAMELEON_POINTER_SCAN='%s' (expected on or off)", scan);
    }
  }
  if (const char* rule = std::getenv("CHAMELEON_EVICTION")) {
    if (std::strcmp(rule, "closest-size") == 0) {
      config.eviction_closest_size = true;
    } else if (std::strcmp(rule, "belady") != 0) {
      Log(LogLevel::kWarn, "ignoring CHAMELEON_EVICTION='%s' (expected belady or closest-size)",
          rule);
    }
  }
  if (const char* placement = std::getenv("CHAMELEON_PLACEMENT")) {
    if (std::strcmp(placement, "host") == 0) {
      config.placement_host = true;
    } else if (std::strcmp(placement, "auto") != 0) {
      Log(LogLevel::kWarn, "ignoring CHAMELEON_PLACEMENT='%s' (expected auto or host)", placement);
    }
  }
  ReadBytes("CHAMELEON_HOST_POOL_BYTES", &config.host_pool_bytes);
  if (const char* topology = std::getenv("CHAMELEON_TOPOLOGY")) config.topology_path = topology;
  ReadBytes("CHAMELEON_SWAP_CHUNK_BYTES", &config.swap_chunk_bytes);
  ReadBytes("CHAMELEON_SWAP_MIN_BYTES", &config.swap_min_bytes);
  return config;
}

}  // namespace chameleon::shim
