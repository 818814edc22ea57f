// Wall-clock latency of the VMM calls the shim's executor issues for every chunk it maps
// (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap, cuMemRelease), one chunk of the device's
// allocation granularity per trial. Stateless; not thread-safe (it sets the current context).
#pragma once

#include <vector>

#include "figures.h"
#include "probe_driver.h"

namespace chameleon::probe {

/// Median and p99 of each call over `trials` create-map-access-unmap-release cycles on
/// `device`; `*chunk_bytes` receives the chunk size used.
std::vector<LatencyFigure> MeasureVmmLatency(const ProbeDriver& driver, int device, int trials,
                                             std::size_t* chunk_bytes);

}  // namespace chameleon::probe
