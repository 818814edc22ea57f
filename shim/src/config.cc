#include "config.h"

#include <cstdlib>
#include <cstring>

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

namespace {

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
  const char* telemetry = std::getenv("CHAMELEON_TELEMETRY");
  config.telemetry = !(telemetry != nullptr && std::strcmp(telemetry, "0") == 0);
  return config;
}

}  // namespace chameleon::shim
