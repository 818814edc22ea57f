#include "chameleon/policy/device_profile.h"

namespace chameleon::policy {

DeviceProjection ProjectToDevice(const Profile& profile, std::uint16_t device) {
  DeviceProjection out{profile, 0, 0};
  for (ProfileTensor& t : out.profile.tensors) {
    if (t.device == device) continue;
    ++out.other_tensors;
    out.other_bytes += t.bytes;
    t.bytes = 0;
    t.swappable = false;
  }
  if (out.other_tensors != 0) {
    for (ProfileOp& op : out.profile.ops) op.bytes_live_after = 0;
  }
  return out;
}

}  // namespace chameleon::policy
