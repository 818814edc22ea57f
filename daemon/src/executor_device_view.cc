#include "chameleon/daemon/executor_device_view.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <limits>

#include "chameleon/policy/device_profile.h"

namespace chameleon::daemon {

std::shared_ptr<const policy::Profile> ExecutorDeviceView::ProfileFor(
    const std::shared_ptr<const policy::Profile>& profile, std::uint64_t executor_device) {
  // Out of range: an untrusted header value no device ordinal can have; plan as before.
  if (!profile || executor_device == 0 ||
      executor_device > std::numeric_limits<std::uint16_t>::max() + std::uint64_t{1}) {
    return profile;
  }
  if (cached_ && source_ == profile && device_ == executor_device) return cached_;
  const auto device = static_cast<std::uint16_t>(executor_device - 1);
  policy::DeviceProjection p = policy::ProjectToDevice(*profile, device);
  source_ = profile;
  device_ = executor_device;
  other_tensors_ = p.other_tensors;
  other_bytes_ = p.other_bytes;
  if (p.other_tensors == 0) {
    cached_ = profile;
  } else {
    spdlog::info(
        "client {} (pid {}): planning for device {}, the one its executor serves: {} tensor(s) "
        "of {} bytes on other devices left out of the profile",
        who_.id, who_.pid, device, p.other_tensors, p.other_bytes);
    cached_ = std::make_shared<const policy::Profile>(std::move(p.profile));
  }
  return cached_;
}

nlohmann::json ExecutorDeviceView::Json() const {
  nlohmann::json j = {{"other_device_tensors", other_tensors_},
                      {"other_device_bytes", other_bytes_}};
  j["device"] = device_ == 0 ? nlohmann::json() : nlohmann::json(device_ - 1);
  return j;
}

}  // namespace chameleon::daemon
