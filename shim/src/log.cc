#include "log.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace chameleon::shim {
namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarn)};
std::atomic<int> g_fd{STDERR_FILENO};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace:
      return "trace";
    case LogLevel::kDebug:
      return "debug";
    case LogLevel::kInfo:
      return "info";
    case LogLevel::kWarn:
      return "warn";
    case LogLevel::kError:
      return "error";
    case LogLevel::kOff:
      break;
  }
  return "off";
}

}  // namespace

bool ParseLogLevel(const char* text, LogLevel* level) {
  static const char* const kNames[] = {"trace", "debug", "info", "warn", "error", "off"};
  if (text == nullptr) return false;
  for (int i = 0; i < 6; ++i) {
    if (std::strcmp(text, kNames[i]) == 0) {
      *level = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

void ConfigureLog(const char* level, const char* file) {
  LogLevel parsed = LogLevel::kWarn;
  const bool level_ok = level == nullptr || level[0] == '\0' || ParseLogLevel(level, &parsed);
  g_level.store(static_cast<int>(parsed), std::memory_order_relaxed);
  if (file != nullptr && file[0] != '\0') {
    const int fd = ::open(file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      g_fd.store(fd, std::memory_order_relaxed);
    } else {
      Log(LogLevel::kWarn, "cannot open CHAMELEON_LOG_FILE '%s'; logging to stderr", file);
    }
  }
  if (!level_ok) Log(LogLevel::kWarn, "unknown CHAMELEON_LOG_LEVEL '%s'; using warn", level);
}

bool LogEnabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed) &&
         level != LogLevel::kOff;
}

void Log(LogLevel level, const char* format, ...) {
  if (!LogEnabled(level)) return;
  char line[4096];
  int n = std::snprintf(line, sizeof(line), "[chameleon %d] %s: ", static_cast<int>(::getpid()),
                        LevelName(level));
  if (n < 0) return;
  va_list args;
  va_start(args, format);
  const int m = std::vsnprintf(line + n, sizeof(line) - static_cast<std::size_t>(n), format, args);
  va_end(args);
  if (m < 0) return;
  std::size_t len = std::strlen(line);
  if (len + 1 < sizeof(line)) line[len++] = '\n';
  // One write keeps concurrent messages whole; a short write of a log line is not worth a retry.
  const ssize_t ignored = ::write(g_fd.load(std::memory_order_relaxed), line, len);
  (void)ignored;
}

}  // namespace chameleon::shim
