// A multi-device profile as one device sees it. The shim's swap executor serves one device per
// process (docs/executor.md); a process driving several (a 1F1B pipeline, one stage per device)
// records one op stream over all of them, and planning that stream against one device's limit
// counts every device's bytes against it (Llama 2 7B on four stages: 64.6 GB "still over" a
// 42 GB limit that only device 0 exceeds, by 3.5 GB).
#pragma once

#include <cstdint>

#include "chameleon/policy/profile.h"

namespace chameleon::policy {

struct DeviceProjection {
  Profile profile;                  ///< the input with other devices' tensors neutralised
  std::uint32_t other_tensors = 0;  ///< tensors of other devices
  std::uint64_t other_bytes = 0;    ///< their bytes
};

/// `profile` as `device` sees it. The op sequence stays whole — the shim counts occurrences and
/// argument positions over the process's whole stream, and the other devices' ops are the time
/// this device waits on them — while every tensor of another device becomes zero bytes and
/// unswappable: it takes no room on `device` and is never planned. `bytes_live_after` is
/// dropped (set to 0) when any tensor was: it is a measurement of the device each op ran on, not
/// of `device`. A profile with no tensor on another device comes back unchanged.
DeviceProjection ProjectToDevice(const Profile& profile, std::uint16_t device);

}  // namespace chameleon::policy
