// ExecutorDeviceView: the profile one client's candidates are planned from, seen from the device
// its swap executor serves. The shim reports that device in the segment header (layout 1.5,
// `executor_device`); a client driving several devices (a pipeline) records tensors of all of
// them, and its other devices' bytes must not count against this device's limit
// (policy::ProjectToDevice). Not thread-safe: only the loop thread touches it.
#pragma once

#include <cstdint>
#include <memory>

#include <nlohmann/json_fwd.hpp>

#include "chameleon/daemon/client_identity.h"
#include "chameleon/policy/profile.h"

namespace chameleon::daemon {

class ExecutorDeviceView {
 public:
  explicit ExecutorDeviceView(const ClientIdentity& who) : who_(who) {}

  /// `profile` as the executor's device sees it. `executor_device`: the header's field (device
  /// + 1; 0 from an older shim or before its executor is decided: `profile` as it is). Cached
  /// until the profile or the device changes; logs once per profile that spans devices.
  std::shared_ptr<const policy::Profile> ProfileFor(
      const std::shared_ptr<const policy::Profile>& profile, std::uint64_t executor_device);

  /// What chameleonctl shows: device planned for (null when unknown), tensors and bytes of
  /// other devices left out of the last profile.
  nlohmann::json Json() const;

 private:
  const ClientIdentity& who_;
  std::shared_ptr<const policy::Profile> source_;  // the last profile projected
  std::shared_ptr<const policy::Profile> cached_;  // its projection
  std::uint64_t device_ = 0;                       // executor_device it was projected for
  std::uint32_t other_tensors_ = 0;
  std::uint64_t other_bytes_ = 0;
};

}  // namespace chameleon::daemon
