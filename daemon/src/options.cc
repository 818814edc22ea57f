#include "chameleon/daemon/options.h"

#include <algorithm>

namespace chameleon::daemon {

std::uint64_t ConfiguredDeviceLimit(const DaemonOptions& options, std::int64_t ordinal) {
  for (const DeviceLimit& limit : options.device_limits) {
    if (static_cast<std::int64_t>(limit.index) == ordinal) return limit.limit_bytes;
  }
  return 0;
}

std::uint64_t EffectiveDeviceLimit(std::uint64_t configured, std::uint64_t client,
                                   std::uint64_t total_memory) {
  // An operator's limit above the device's memory (a config shared by nodes with different GPUs)
  // is no permission to plan for memory that is not there.
  if (configured != 0 && total_memory != 0) configured = std::min(configured, total_memory);
  if (configured != 0 && client != 0) return std::min(configured, client);
  if (configured != 0) return configured;
  if (client != 0) return client;
  return total_memory;
}

}  // namespace chameleon::daemon

namespace chameleon::daemon {

bool UidRule::Allows(std::uint32_t uid) const {
  return all || std::find(uids.begin(), uids.end(), uid) != uids.end();
}

bool LendingOptions::LendsGpu(const std::string& gpu) const {
  return all_gpus || std::find(gpus.begin(), gpus.end(), gpu) != gpus.end();
}

}  // namespace chameleon::daemon
