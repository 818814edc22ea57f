// Token -> kernel-name table. See name_table_layout.h.
#include "chameleon/ipc/name_table.h"

#include <algorithm>
#include <cstring>

namespace chameleon::ipc {
namespace {

constexpr std::uint64_t AlignEntry(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }

}  // namespace

NameTableWriter::NameTableWriter(NameTableDescriptor* descriptor, std::uint8_t* data,
                                 std::uint64_t capacity)
    : descriptor_(descriptor), data_(data), capacity_(capacity) {
  // Continue after entries an earlier writer object committed (clamped: it is shared memory).
  used_ = std::min(descriptor_->committed_bytes.load(std::memory_order_relaxed), capacity_);
  used_ = AlignEntry(used_) > capacity_ ? capacity_ : AlignEntry(used_);
}

bool NameTableWriter::Append(std::uint32_t token, std::string_view name) {
  const std::size_t name_bytes = std::min(name.size(), kMaxNameBytes);
  const std::uint64_t entry_bytes = AlignEntry(sizeof(NameEntryHeader) + name_bytes);
  if (entry_bytes > capacity_ - used_) return false;
  NameEntryHeader header{token, static_cast<std::uint16_t>(name_bytes), 0};
  std::memcpy(data_ + used_, &header, sizeof(header));
  std::memcpy(data_ + used_ + sizeof(header), name.data(), name_bytes);
  used_ += entry_bytes;
  // Release: a reader that sees the new committed_bytes sees the whole entry.
  descriptor_->committed_bytes.store(used_, std::memory_order_release);
  descriptor_->entry_count.fetch_add(1, std::memory_order_relaxed);
  return true;
}

NameTableReader::NameTableReader(const NameTableDescriptor* descriptor, const std::uint8_t* data,
                                 std::uint64_t capacity)
    : descriptor_(descriptor), data_(data), capacity_(capacity) {}

// Reads the entry at read_ if it lies wholly below limit_. `corrupt` is set when an entry
// overruns the committed bytes or declares an impossible name length.
bool NameTableReader::NextEntry(std::uint32_t* token, std::string_view* name, bool* corrupt) {
  if (read_ == limit_) return false;
  NameEntryHeader header;
  if (limit_ - read_ < sizeof(header)) {
    *corrupt = true;
    return false;
  }
  std::memcpy(&header, data_ + read_, sizeof(header));
  const std::uint64_t entry_bytes = AlignEntry(sizeof(header) + header.name_bytes);
  if (header.name_bytes > kMaxNameBytes || entry_bytes > limit_ - read_) {
    *corrupt = true;
    return false;
  }
  *token = header.token;
  *name = std::string_view(reinterpret_cast<const char*>(data_ + read_ + sizeof(header)),
                           header.name_bytes);
  read_ += entry_bytes;
  return true;
}

}  // namespace chameleon::ipc
