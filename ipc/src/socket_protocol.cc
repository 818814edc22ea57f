// Socket message encoders and validating decoders. See socket_protocol.h and docs/protocol.md.
#include "chameleon/ipc/socket_protocol.h"

#include <algorithm>

#include "byte_io.h"
#include "chameleon/ipc/constants.h"
#include "chameleon/ipc/segment_layout.h"

namespace chameleon::ipc {
namespace {

using detail::Append;
using detail::AppendBytes;
using detail::LoadAt;

void AppendHeader(MessageType type, std::size_t payload_bytes, std::vector<std::uint8_t>* out) {
  MessageHeader header{};
  header.magic = kMessageMagic;
  header.major = kProtocolMajor;
  header.minor = kProtocolMinor;
  header.type = static_cast<std::uint16_t>(type);
  header.flags = 0;
  header.payload_bytes = static_cast<std::uint32_t>(payload_bytes);
  Append(out, header);
}

bool HasNul(std::span<const std::uint8_t> bytes) {
  return std::find(bytes.begin(), bytes.end(), 0) != bytes.end();
}

DecodeError ValidateDevice(const DeviceFacts& device) {
  const auto* id = device.pci_bus_id;
  if (std::find(id, id + sizeof(device.pci_bus_id), '\0') == id + sizeof(device.pci_bus_id)) {
    return DecodeError::kBadField;  // not NUL-terminated
  }
  if (device.ordinal < 0 || device.ordinal >= static_cast<std::int32_t>(kMaxDevices) ||
      device.host_numa_node < -1) {
    return DecodeError::kBadField;
  }
  return DecodeError::kOk;
}

}  // namespace

const char* ToString(DecodeError error) {
  switch (error) {
    case DecodeError::kOk:
      return "ok";
    case DecodeError::kIncomplete:
      return "incomplete message";
    case DecodeError::kBadMagic:
      return "bad message magic";
    case DecodeError::kMajorMismatch:
      return "protocol major version mismatch";
    case DecodeError::kUnknownType:
      return "unknown message type";
    case DecodeError::kPayloadTooLarge:
      return "payload too large";
    case DecodeError::kPayloadTooSmall:
      return "payload too small";
    case DecodeError::kBadField:
      return "field out of range";
  }
  return "unknown decode error";
}

DecodeError DecodeHeader(std::span<const std::uint8_t> bytes, MessageHeader* header) {
  if (bytes.size() < sizeof(MessageHeader)) return DecodeError::kIncomplete;
  const auto h = LoadAt<MessageHeader>(bytes, 0);
  if (h.magic != kMessageMagic) return DecodeError::kBadMagic;
  if (h.major != kProtocolMajor) return DecodeError::kMajorMismatch;
  if (h.type < static_cast<std::uint16_t>(MessageType::kHello) ||
      h.type > static_cast<std::uint16_t>(MessageType::kControlReply)) {
    return DecodeError::kUnknownType;
  }
  if (h.payload_bytes > kMaxPayloadBytes) return DecodeError::kPayloadTooLarge;
  *header = h;
  return DecodeError::kOk;
}

DecodeError DecodeHello(std::span<const std::uint8_t> payload, Hello* hello) {
  if (payload.size() < sizeof(HelloFixed)) return DecodeError::kPayloadTooSmall;
  const auto fixed = LoadAt<HelloFixed>(payload, 0);
  if (fixed.layout_major != kLayoutMajor) return DecodeError::kMajorMismatch;
  if (fixed.pid <= 0 || fixed.segment_bytes < sizeof(SegmentHeader) ||
      fixed.device_count > kMaxDevices) {
    return DecodeError::kBadField;
  }
  const std::size_t devices_bytes = std::size_t{fixed.device_count} * sizeof(DeviceFacts);
  if (payload.size() - sizeof(HelloFixed) < devices_bytes) return DecodeError::kPayloadTooSmall;
  Hello decoded;
  decoded.fixed = fixed;
  decoded.devices.reserve(fixed.device_count);
  for (std::uint32_t i = 0; i < fixed.device_count; ++i) {
    const auto device = LoadAt<DeviceFacts>(payload, sizeof(HelloFixed) + i * sizeof(DeviceFacts));
    if (const DecodeError e = ValidateDevice(device); e != DecodeError::kOk) return e;
    decoded.devices.push_back(device);
  }
  *hello = std::move(decoded);
  return DecodeError::kOk;
}

DecodeError DecodeWelcome(std::span<const std::uint8_t> payload, Welcome* welcome) {
  if (payload.size() < sizeof(Welcome)) return DecodeError::kPayloadTooSmall;
  const auto w = LoadAt<Welcome>(payload, 0);
  if (w.daemon_pid <= 0 || w.heartbeat_interval_ns == 0) return DecodeError::kBadField;
  *welcome = w;
  return DecodeError::kOk;
}

DecodeError DecodeRefuse(std::span<const std::uint8_t> payload, RefuseReason* reason,
                         std::string* text) {
  if (payload.size() < sizeof(RefuseFixed)) return DecodeError::kPayloadTooSmall;
  const auto fixed = LoadAt<RefuseFixed>(payload, 0);
  // Reasons are open-ended (a newer daemon may add some); 0 is never valid.
  if (fixed.reason == 0) return DecodeError::kBadField;
  if (fixed.text_bytes > payload.size() - sizeof(RefuseFixed)) {
    return DecodeError::kPayloadTooSmall;
  }
  const auto bytes = payload.subspan(sizeof(RefuseFixed), fixed.text_bytes);
  if (HasNul(bytes)) return DecodeError::kBadField;
  *reason = static_cast<RefuseReason>(fixed.reason);
  text->assign(bytes.begin(), bytes.end());
  return DecodeError::kOk;
}

DecodeError DecodeControl(std::span<const std::uint8_t> payload, std::string* json) {
  if (payload.empty()) return DecodeError::kPayloadTooSmall;
  if (HasNul(payload)) return DecodeError::kBadField;
  json->assign(payload.begin(), payload.end());
  return DecodeError::kOk;
}

void EncodeHello(const Hello& hello, std::vector<std::uint8_t>* out) {
  HelloFixed fixed = hello.fixed;
  fixed.device_count =
      static_cast<std::uint32_t>(std::min<std::size_t>(hello.devices.size(), kMaxDevices));
  AppendHeader(MessageType::kHello, sizeof(fixed) + fixed.device_count * sizeof(DeviceFacts), out);
  Append(out, fixed);
  AppendBytes(out, hello.devices.data(), fixed.device_count * sizeof(DeviceFacts));
}

void EncodeWelcome(const Welcome& welcome, std::vector<std::uint8_t>* out) {
  AppendHeader(MessageType::kWelcome, sizeof(welcome), out);
  Append(out, welcome);
}

void EncodeRefuse(RefuseReason reason, std::string_view text, std::vector<std::uint8_t>* out) {
  text = text.substr(0, std::min<std::size_t>(text.size(), kMaxPayloadBytes - sizeof(RefuseFixed)));
  text = text.substr(0, std::min(text.size(), text.find('\0')));  // decoders refuse NULs
  AppendHeader(MessageType::kRefuse, sizeof(RefuseFixed) + text.size(), out);
  Append(out,
         RefuseFixed{static_cast<std::uint32_t>(reason), static_cast<std::uint32_t>(text.size())});
  AppendBytes(out, text.data(), text.size());
}

bool EncodeControl(MessageType type, std::string_view json, std::vector<std::uint8_t>* out) {
  if (json.size() > kMaxPayloadBytes) return false;
  AppendHeader(type, json.size(), out);
  AppendBytes(out, json.data(), json.size());
  return true;
}

}  // namespace chameleon::ipc
