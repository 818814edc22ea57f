// PolicySink: where the daemon client (client.h) delivers the policies it reads from the daemon,
// and whence it takes the executor's figures that it publishes into the segment header. The
// client is given one at construction (init.cc wires the executor's, executor.h); it never
// reaches the executor any other way (docs/shim.md, "Layers").
//
// Thread-safety: implementations are called from the client thread while the program's threads
// run ops, and must be safe for that.
#pragma once

#include <cstdint>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/segment_layout.h"

namespace chameleon::shim {

class PolicySink {
 public:
  virtual ~PolicySink() = default;
  /// A decoded policy, applied at the next iteration boundary. False when nothing executes
  /// policies (the executor is off or not decided yet): the client then acknowledges the
  /// generation in the segment itself.
  virtual bool SetPolicy(const ipc::Policy& policy) = 0;
  /// The device limit in force; 0 while nothing enforces one.
  virtual std::uint64_t DeviceLimit() const = 0;
  /// The limit of the shim's own (CHAMELEON_DEVICE_LIMIT, else the device's memory) that the
  /// daemon's may only lower; 0 while nothing enforces one.
  virtual std::uint64_t OwnLimit() const = 0;
  /// Copies the executor's counters into the segment header (nothing while it is off).
  virtual void PublishCounters(ipc::SegmentHeader* header) const = 0;
};

}  // namespace chameleon::shim
