// Reading execution traces from disk (gzip or plain JSON, detected by content).
#pragma once

#include <string>
#include <string_view>

#include "chameleon/trace/trace.h"

namespace chameleon::trace {

/// Reads a whole file, inflating it when it is gzip (zlib detects the header). Throws TraceError
/// naming the file on a missing file, a truncated or corrupt gzip stream.
std::string ReadMaybeGzip(const std::string& path);

/// Parses an execution trace from JSON text. `path` is only used in error messages.
/// Throws TraceError (file, node id, field) on malformed input; never crashes.
Trace ParseTrace(std::string_view json_text, const std::string& path);

/// ReadMaybeGzip + ParseTrace.
Trace ReadTrace(const std::string& path);

}  // namespace chameleon::trace
