// Policy mailbox: two slots and a generation seqlock. See policy_mailbox_layout.h.
//
// Both sides touch the blob bytes only through atomic 8-byte loads and stores (std::atomic_ref),
// so a reader racing with the writer is a torn copy detected by the sequence check, never
// undefined behaviour, and ThreadSanitizer agrees. The words are stored with release and loaded
// with acquire instead of the textbook relaxed accesses + fences, because GCC's ThreadSanitizer
// does not support atomic_thread_fence; on x86 both compile to plain moves. The argument: if the
// reader loads any word of generation g+2 (written after seq = odd), acquire makes that odd seq
// visible to its re-check, so the copy is rejected.
#include "chameleon/ipc/policy_mailbox.h"

#include <atomic>
#include <cstring>

namespace chameleon::ipc {
namespace {

using Word = std::uint64_t;
static_assert(std::atomic_ref<Word>::required_alignment <= sizeof(Word));

PolicySlotHeader* SlotAt(std::uint8_t* base, std::uint64_t slot_bytes, std::uint64_t generation) {
  const std::uint64_t index = generation % 2;
  return reinterpret_cast<PolicySlotHeader*>(base + sizeof(PolicyMailboxDescriptor) +
                                             index * (sizeof(PolicySlotHeader) + slot_bytes));
}

Word* SlotWords(PolicySlotHeader* slot) {
  return reinterpret_cast<Word*>(reinterpret_cast<std::uint8_t*>(slot) + sizeof(PolicySlotHeader));
}

void StoreWords(Word* dst, std::span<const std::uint8_t> src) {
  const std::size_t whole = src.size() / sizeof(Word);
  for (std::size_t i = 0; i < whole; ++i) {
    Word w;
    std::memcpy(&w, src.data() + i * sizeof(Word), sizeof(Word));
    std::atomic_ref<Word>(dst[i]).store(w, std::memory_order_release);
  }
  if (const std::size_t rest = src.size() % sizeof(Word); rest != 0) {
    Word w = 0;  // the unused tail bytes of the last word are zero
    std::memcpy(&w, src.data() + whole * sizeof(Word), rest);
    std::atomic_ref<Word>(dst[whole]).store(w, std::memory_order_release);
  }
}

void LoadWords(Word* src, std::size_t words, std::uint8_t* dst) {
  for (std::size_t i = 0; i < words; ++i) {
    const Word w = std::atomic_ref<Word>(src[i]).load(std::memory_order_acquire);
    std::memcpy(dst + i * sizeof(Word), &w, sizeof(Word));
  }
}

}  // namespace

PolicyMailboxWriter::PolicyMailboxWriter(std::uint8_t* base, std::uint64_t slot_bytes)
    : descriptor_(reinterpret_cast<PolicyMailboxDescriptor*>(base)),
      base_(base),
      slot_bytes_(slot_bytes) {
  generation_ = descriptor_->latest_generation.load(std::memory_order_relaxed);
}

PublishResult PolicyMailboxWriter::Publish(std::span<const std::uint8_t> blob,
                                           std::uint64_t* generation) {
  if (blob.size() > slot_bytes_) {
    descriptor_->refused_too_large.fetch_add(1, std::memory_order_relaxed);
    return PublishResult::kTooLarge;
  }
  const std::uint64_t g = generation_ + 1;
  PolicySlotHeader* slot = SlotAt(base_, slot_bytes_, g);
  // Odd sequence first; the blob stores are releases after it, so a reader that sees any new
  // blob word (or the new size) also sees, at its re-check, that the sequence changed.
  slot->seq.store(2 * g - 1, std::memory_order_relaxed);
  slot->blob_bytes.store(blob.size(), std::memory_order_release);
  StoreWords(SlotWords(slot), blob);
  slot->seq.store(2 * g, std::memory_order_release);
  descriptor_->latest_generation.store(g, std::memory_order_release);
  generation_ = g;
  if (generation != nullptr) *generation = g;
  return PublishResult::kOk;
}

PolicyMailboxReader::PolicyMailboxReader(const std::uint8_t* base, std::uint64_t slot_bytes)
    : descriptor_(reinterpret_cast<const PolicyMailboxDescriptor*>(base)),
      base_(base),
      slot_bytes_(slot_bytes) {}

ReadResult PolicyMailboxReader::Poll() {
  const std::uint64_t g = descriptor_->latest_generation.load(std::memory_order_acquire);
  if (g == generation_) return ReadResult::kUnchanged;
  if (g < generation_) {  // generations never go backwards
    ++corrupt_reads_;
    return ReadResult::kCorrupt;
  }
  // The mapping is writable; atomic_ref needs a non-const object, nothing here writes through it.
  PolicySlotHeader* slot = SlotAt(const_cast<std::uint8_t*>(base_), slot_bytes_, g);
  const std::uint64_t before = slot->seq.load(std::memory_order_acquire);
  if (before != 2 * g) {  // being rewritten (with g + 2) right now
    ++torn_reads_;
    return ReadResult::kTorn;
  }
  const std::uint64_t bytes = slot->blob_bytes.load(std::memory_order_acquire);
  if (bytes > slot_bytes_) {
    ++corrupt_reads_;
    return ReadResult::kCorrupt;
  }
  const std::size_t words = (bytes + sizeof(Word) - 1) / sizeof(Word);
  if (scratch_.size() < words * sizeof(Word)) scratch_.resize(words * sizeof(Word));
  LoadWords(SlotWords(slot), words, scratch_.data());
  if (slot->seq.load(std::memory_order_relaxed) != before) {
    ++torn_reads_;
    return ReadResult::kTorn;
  }
  buffer_.swap(scratch_);
  blob_bytes_ = bytes;
  generation_ = g;
  return ReadResult::kNew;
}

}  // namespace chameleon::ipc
