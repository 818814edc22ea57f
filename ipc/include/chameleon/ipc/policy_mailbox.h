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
  /// Generations continue after the latest one already in the mailbox (a restarted daemon
  /// attaching the same segment keeps them increasing).
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
  /// out of bounds (a hostile or broken writer: blob_bytes > slot_bytes, or a generation going
  /// backwards). On anything but kNew, blob() and generation() keep the last accepted values.
  /// Allocates only when a blob larger than any before arrives (not a hot path: the shim polls
  /// from its background thread).
  ReadResult Poll();
  std::span<const std::uint8_t> blob() const { return {buffer_.data(), blob_bytes_}; }
  std::uint64_t generation() const { return generation_; }
  std::uint64_t torn_reads() const { return torn_reads_; }
  std::uint64_t corrupt_reads() const { return corrupt_reads_; }

 private:
  const PolicyMailboxDescriptor* descriptor_ = nullptr;
  const std::uint8_t* base_ = nullptr;
  std::uint64_t slot_bytes_ = 0;
  std::uint64_t generation_ = 0;
  std::uint64_t torn_reads_ = 0;
  // Poll copies into scratch_ and swaps it with buffer_ only when the copy is whole, so blob()
  // keeps the last accepted policy across torn reads. Both grow to the largest blob seen (not
  // to slot_bytes up front: an 8 MiB slot would cost every process 16 MiB of heap).
  std::vector<std::uint8_t> buffer_;
  std::vector<std::uint8_t> scratch_;
  std::size_t blob_bytes_ = 0;
  std::uint64_t corrupt_reads_ = 0;
};

}  // namespace chameleon::ipc
