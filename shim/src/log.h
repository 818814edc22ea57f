// Minimal logging for a guest library: never stdout, never on the launch hot path. Messages go to
// stderr or to CHAMELEON_LOG_FILE, prefixed "[chameleon pid] level:". No spdlog: it would drag a
// dynamic libspdlog/libfmt into every CUDA process (Debian ships only shared builds).
// Thread-safe (one write(2) per message).
#pragma once

#include <cstdarg>

namespace chameleon::shim {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarn = 3, kError = 4, kOff = 5 };

/// Sets the level and output from the environment values (may be null). Called once at init.
void ConfigureLog(const char* level, const char* file);
bool LogEnabled(LogLevel level);
void Log(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

/// Parses "trace|debug|info|warn|error|off" (case-sensitive); false when unknown.
bool ParseLogLevel(const char* text, LogLevel* level);

}  // namespace chameleon::shim
