// Writer and reader of the token -> name table (layout in name_table_layout.h).
#pragma once

#include <cstdint>
#include <string_view>

#include "chameleon/ipc/name_table_layout.h"

namespace chameleon::ipc {

/// Appends names. Not thread-safe: callers serialise (the shim names a token once, under its
/// token-registry lock, off the launch hot path).
class NameTableWriter {
 public:
  NameTableWriter() = default;
  NameTableWriter(NameTableDescriptor* descriptor, std::uint8_t* data, std::uint64_t capacity);
  /// False when the table is full (the caller counts the drop).
  bool Append(std::uint32_t token, std::string_view name);

 private:
  NameTableDescriptor* descriptor_ = nullptr;
  std::uint8_t* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t used_ = 0;
};

/// Reads entries committed since the last call. Validates every entry against the capacity.
/// Not thread-safe (one reader).
class NameTableReader {
 public:
  NameTableReader() = default;
  NameTableReader(const NameTableDescriptor* descriptor, const std::uint8_t* data,
                  std::uint64_t capacity);
  /// Calls `sink(token, name)` for each new entry; false if the table content is corrupt
  /// (the caller disconnects the client). `name` points into shared memory: copy it.
  template <typename Sink>
  bool ReadNew(Sink&& sink);

 private:
  bool NextEntry(std::uint32_t* token, std::string_view* name, bool* corrupt);
  const NameTableDescriptor* descriptor_ = nullptr;
  const std::uint8_t* data_ = nullptr;
  std::uint64_t capacity_ = 0;
  std::uint64_t read_ = 0;
  std::uint64_t limit_ = 0;
};

template <typename Sink>
bool NameTableReader::ReadNew(Sink&& sink) {
  limit_ = descriptor_->committed_bytes.load(std::memory_order_acquire);
  if (limit_ > capacity_ || limit_ < read_) return false;
  std::uint32_t token = 0;
  std::string_view name;
  bool corrupt = false;
  while (NextEntry(&token, &name, &corrupt)) sink(token, name);
  return !corrupt;
}

}  // namespace chameleon::ipc
