// Messages on the daemon's UNIX stream socket (shim <-> daemon, chameleonctl <-> daemon).
// Every message is MessageHeader + payload. Binary payloads are fixed-layout structs; control
// requests and replies are UTF-8 JSON. A peer that sends anything invalid gets REFUSE (when a reply
// makes sense) and is disconnected. A newer minor on either side only appends fields AT THE END
// of a payload (after any array), so a decoder accepts payloads longer than it knows and ignores
// the rest; fixed structs and array elements never grow within a major. The header's flags are
// reserved (sent as 0, ignored on receipt). See docs/protocol.md for the message catalogue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chameleon::ipc {

/// "CHMS" little-endian.
inline constexpr std::uint32_t kMessageMagic = 0x534d4843u;
inline constexpr std::uint32_t kMaxPayloadBytes = 64u << 10;
inline constexpr std::uint32_t kMaxDevices = 64;

enum class MessageType : std::uint16_t {
  kHello = 1,           ///< shim -> daemon; fd of the segment attached (SCM_RIGHTS)
  kWelcome = 2,         ///< daemon -> shim
  kRefuse = 3,          ///< daemon -> peer: RefusePayload
  kControlRequest = 4,  ///< chameleonctl -> daemon: JSON {"command": ..., ...}
  kControlReply = 5,    ///< daemon -> chameleonctl: JSON
};

struct MessageHeader {
  std::uint32_t magic;
  std::uint16_t major;
  std::uint16_t minor;
  std::uint16_t type;
  std::uint16_t flags;          ///< reserved, 0
  std::uint32_t payload_bytes;  ///< <= kMaxPayloadBytes
};
static_assert(sizeof(MessageHeader) == 16);
static_assert(offsetof(MessageHeader, type) == 8);
static_assert(offsetof(MessageHeader, payload_bytes) == 12);

/// What the shim learns in-process about each visible device (the daemon never opens GPUs).
struct DeviceFacts {
  std::int32_t ordinal;
  std::int32_t host_numa_node;  ///< -1 unknown
  std::uint64_t total_memory;
  std::uint64_t peer_mask;  ///< bit j: can access peer device j
  char pci_bus_id[16];      ///< NUL-terminated "0000:00:00.0"
};
static_assert(sizeof(DeviceFacts) == 40);

struct HelloFixed {
  std::uint16_t layout_major;  ///< segment layout the shim wrote
  std::uint16_t layout_minor;
  std::int32_t pid;  ///< informational; SO_PEERCRED is authoritative
  std::uint64_t segment_bytes;
  std::uint32_t device_count;  ///< DeviceFacts that follow, <= kMaxDevices
  std::uint32_t reserved;
  // DeviceFacts devices[device_count];
};
static_assert(sizeof(HelloFixed) == 24);

struct Hello {
  HelloFixed fixed{};
  std::vector<DeviceFacts> devices;
};

struct Welcome {
  std::uint32_t client_id;
  std::int32_t daemon_pid;
  std::uint64_t heartbeat_interval_ns;
};
static_assert(sizeof(Welcome) == 16);

enum class RefuseReason : std::uint32_t {
  kBadMessage = 1,
  kVersionMismatch = 2,
  kBadSegment = 3,
  kTooManyClients = 4,
  kPermissionDenied = 5,
  kUnknownCommand = 6,
};

struct RefuseFixed {
  std::uint32_t reason;      ///< RefuseReason
  std::uint32_t text_bytes;  ///< UTF-8 explanation that follows
};
static_assert(sizeof(RefuseFixed) == 8);

enum class DecodeError : std::uint8_t {
  kOk,
  kIncomplete,  ///< need more bytes (not an error on a stream)
  kBadMagic,
  kMajorMismatch,
  kUnknownType,
  kPayloadTooLarge,
  kPayloadTooSmall,
  kBadField,  ///< a field out of range (device_count, text length, NUL in bus id, ...)
};
const char* ToString(DecodeError error);

/// Parses and validates a header from the first bytes of `bytes` (kIncomplete if fewer than
/// sizeof(MessageHeader)). The whole message is sizeof(MessageHeader) + payload_bytes.
DecodeError DecodeHeader(std::span<const std::uint8_t> bytes, MessageHeader* header);
DecodeError DecodeHello(std::span<const std::uint8_t> payload, Hello* hello);
DecodeError DecodeWelcome(std::span<const std::uint8_t> payload, Welcome* welcome);
DecodeError DecodeRefuse(std::span<const std::uint8_t> payload, RefuseReason* reason,
                         std::string* text);
/// Control request/reply payload: UTF-8 JSON text (not parsed here; no NUL bytes allowed).
DecodeError DecodeControl(std::span<const std::uint8_t> payload, std::string* json);

/// Encoders append a whole message (header + payload) to `out`. EncodeHello sends at most
/// kMaxDevices devices; EncodeRefuse truncates its text to fit kMaxPayloadBytes.
void EncodeHello(const Hello& hello, std::vector<std::uint8_t>* out);
void EncodeWelcome(const Welcome& welcome, std::vector<std::uint8_t>* out);
void EncodeRefuse(RefuseReason reason, std::string_view text, std::vector<std::uint8_t>* out);
/// `type` is kControlRequest or kControlReply. Returns false (and appends nothing) when the JSON
/// exceeds kMaxPayloadBytes: the caller must shorten the reply, never send a partial one.
bool EncodeControl(MessageType type, std::string_view json, std::vector<std::uint8_t>* out);

}  // namespace chameleon::ipc
