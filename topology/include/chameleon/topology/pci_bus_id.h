// The one canonical spelling of a PCI bus id, the node-wide identity of a GPU: CUDA, NVML and
// sysfs each write it their own way. Pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace chameleon::topology {

/// Writes the canonical form of a PCI bus id ("0000:18:00.0", lower-case; an 8-digit NVML
/// domain shortened) to `out`. Returns "" or a one-line reason.
std::string NormalizePciBusId(std::string_view text, std::string* out);

}  // namespace chameleon::topology
