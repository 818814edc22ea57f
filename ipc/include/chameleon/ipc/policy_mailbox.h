// Writer (daemon) and reader (shim) of the policy mailbox (layout in policy_mailbox_layout.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "chameleon/ipc/policy_mailbox_layout.h"

namespace chameleon::ipc {

enum class PublishResult : std::uint8_t { kOk, kTooLarge };

/// Publishes blobs; never waits for the reader. Not thread-safe (one writer).
class PolicyMailboxWriter {
 public:
  PolicyMailboxWriter() = default;
  /// `base` points at the PolicyMailboxDescriptor; `slot_bytes` as recorded in the header.
  PolicyMailboxWriter(std::uint8_t* base, std::uint64_t slot_bytes);
  /// Publishes `blob` as the next generation; a blob larger than a slot is refused (counted in
  /// the descriptor), never truncated. Returns the generation through `generation` on success.
  PublishResult Publish(std::span<const std::uint8_t> blob, std::uint64_t* generation = nullptr);
  std::uint64_t generation() const { return generation_; }

 private:
  PolicyMailboxDescriptor* descriptor_ = nullptr;
  std::uint8_t* base_ = nullptr;
  std::uint64_t slot_bytes_ = 0;
  std::uint64_t generation_ = 0;
};

enum class ReadResult : std::uint8_t { kNew, kUnchanged, kTorn, kCorrupt };

/// Reads the latest generation. Not thread-safe (one reader). Copies into its own buffer, so a
/// reader that sees a torn copy keeps whatever it accepted before.
class PolicyMailboxReader {
 public:
  PolicyMailboxReader() = default;
  PolicyMailboxReader(const std::uint8_t* base, std::uint64_t slot_bytes);
  /// kNew: `blob()` holds a whole newer generation. kTorn: retry later. kCorrupt: header fields
  /// out of bounds (a hostile or broken writer).
  ReadResult Poll();
  std::span<const std::uint8_t> blob() const { return {buffer_.data(), blob_bytes_}; }
  std::uint64_t generation() const { return generation_; }
  std::uint64_t torn_reads() const { return torn_reads_; }

 private:
  const PolicyMailboxDescriptor* descriptor_ = nullptr;
  const std::uint8_t* base_ = nullptr;
  std::uint64_t slot_bytes_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t torn_reads_ = 0;
  std::vector<std::uint8_t> buffer_;  // sized once to slot_bytes at construction
  std::size_t blob_bytes_ = 0;
};

}  // namespace chameleon::ipc
