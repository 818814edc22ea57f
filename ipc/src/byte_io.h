// Internal: unaligned little-endian reads and appends for the wire formats. Every protocol
// struct is read with memcpy, never by casting a pointer into a received buffer (which may be
// misaligned and is untrusted).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

namespace chameleon::ipc::detail {

/// Copies a T out of bytes[offset, offset + sizeof(T)); the caller has checked the bounds.
template <typename T>
T LoadAt(std::span<const std::uint8_t> bytes, std::size_t offset) {
  static_assert(std::is_trivially_copyable_v<T>);
  T value;
  std::memcpy(&value, bytes.data() + offset, sizeof(T));
  return value;
}

/// Appends the bytes of `value`.
template <typename T>
void Append(std::vector<std::uint8_t>* out, const T& value) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}

inline void AppendBytes(std::vector<std::uint8_t>* out, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const std::uint8_t*>(data);
  out->insert(out->end(), p, p + bytes);
}

/// Overwrites a T at `offset` of `out` (used to patch a header once the payload is known).
template <typename T>
void StoreAt(std::vector<std::uint8_t>* out, std::size_t offset, const T& value) {
  std::memcpy(out->data() + offset, &value, sizeof(T));
}

}  // namespace chameleon::ipc::detail
