// PolicyPublisher: writes one client's policies into its mailbox, each stamped with the
// session's stage, iteration length and boundary signature, and counts what was published and
// what did not fit a mailbox slot. Not thread-safe: only the loop thread publishes (the shim
// reads the mailbox without locks, docs/protocol.md).
#pragma once

#include <cstdint>
#include <vector>

#include "chameleon/daemon/client_identity.h"
#include "chameleon/daemon/stage_machine.h"
#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/policy_mailbox.h"

namespace chameleon::daemon {

class PolicyPublisher {
 public:
  PolicyPublisher(const ClientIdentity& who, ipc::PolicyMailboxWriter mailbox)
      : who_(who), mailbox_(mailbox) {}

  /// Publishes `base` (nullptr: no swaps, only the stage and boundary) as the next generation.
  /// False when the encoded policy does not fit a mailbox slot (counted in refused()).
  bool Publish(const ipc::Policy* base, Stage stage, std::uint64_t iteration_ops,
               std::vector<std::uint32_t> boundary);

  /// The last generation published (0: none yet).
  std::uint64_t generation() const { return generation_; }
  std::uint64_t published() const { return published_; }
  std::uint64_t refused() const { return refused_; }

 private:
  const ClientIdentity& who_;
  ipc::PolicyMailboxWriter mailbox_;
  std::uint64_t generation_ = 0;
  std::uint64_t published_ = 0;
  std::uint64_t refused_ = 0;
};

}  // namespace chameleon::daemon
