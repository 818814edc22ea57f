// SIMGPU_TIMELINE=<path>: every operation's virtual start and end, one CSV line each, for reading
// where a run's virtual time goes (which stream waited on which copy, how busy each link was).
// A diagnostic: off unless the variable is set, and then one mutex-guarded write per operation.
#pragma once

#include <cstdint>

namespace chameleon::simgpu {

/// What a timeline line describes.
enum class TimelineKind : std::uint8_t { kKernel, kCopy, kWait };

/// Whether SIMGPU_TIMELINE named a file that could be opened (decided once, on first use).
bool TimelineEnabled();

/// Appends `device,stream,kind,start_ns,end_ns,bytes` (stream: the handle's address, so lines of
/// one stream group together; a wait's interval is the virtual time the stream's clock jumped).
void TimelineRecord(int device, const void* stream, TimelineKind kind, std::uint64_t start_ns,
                    std::uint64_t end_ns, double bytes);

}  // namespace chameleon::simgpu
