#include "chameleon/daemon/policy_publisher.h"

#include <spdlog/spdlog.h>

namespace chameleon::daemon {

bool PolicyPublisher::Publish(const ipc::Policy* base, Stage stage, std::uint64_t iteration_ops,
                              std::vector<std::uint32_t> boundary) {
  ipc::Policy policy = base != nullptr ? *base : ipc::Policy{};
  policy.summary.generation = mailbox_.generation() + 1;
  policy.summary.stage = static_cast<std::uint32_t>(stage);
  policy.summary.iteration_ops = iteration_ops;
  policy.boundary = std::move(boundary);
  std::vector<std::uint8_t> blob;
  ipc::EncodePolicy(policy, &blob);
  std::uint64_t generation = 0;
  if (mailbox_.Publish(blob, &generation) != ipc::PublishResult::kOk) {
    ++refused_;
    spdlog::warn("client {} (pid {}): policy of {} bytes does not fit the mailbox slot", who_.id,
                 who_.pid, blob.size());
    return false;
  }
  generation_ = generation;
  ++published_;
  return true;
}

}  // namespace chameleon::daemon
