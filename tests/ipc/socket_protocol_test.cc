// Socket messages: round trips, minor-version tolerance and every DecodeError.
#include "chameleon/ipc/socket_protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "chameleon/ipc/constants.h"

namespace chameleon::ipc {
namespace {

DeviceFacts Device(int ordinal) {
  DeviceFacts d{};
  d.ordinal = ordinal;
  d.host_numa_node = ordinal / 2;
  d.total_memory = 80ull << 30;
  d.peer_mask = 0b1111;
  std::snprintf(d.pci_bus_id, sizeof(d.pci_bus_id), "0000:%02x:00.0", ordinal + 0x10);
  return d;
}

Hello SampleHello() {
  Hello h;
  h.fixed.layout_major = kLayoutMajor;
  h.fixed.layout_minor = kLayoutMinor;
  h.fixed.pid = 1234;
  h.fixed.segment_bytes = 20u << 20;
  h.devices = {Device(0), Device(1)};
  return h;
}

// Splits an encoded message into its validated header and payload.
std::span<const std::uint8_t> PayloadOf(const std::vector<std::uint8_t>& msg, MessageHeader* h) {
  EXPECT_EQ(DecodeHeader(msg, h), DecodeError::kOk);
  EXPECT_EQ(msg.size(), sizeof(MessageHeader) + h->payload_bytes);
  return std::span(msg).subspan(sizeof(MessageHeader));
}

TEST(SocketProtocolTest, ShouldRoundTripHelloWithDevices) {
  std::vector<std::uint8_t> msg;
  EncodeHello(SampleHello(), &msg);
  MessageHeader h;
  const auto payload = PayloadOf(msg, &h);
  EXPECT_EQ(h.type, static_cast<std::uint16_t>(MessageType::kHello));
  EXPECT_EQ(h.major, kProtocolMajor);
  Hello got;
  ASSERT_EQ(DecodeHello(payload, &got), DecodeError::kOk);
  EXPECT_EQ(got.fixed.pid, 1234);
  EXPECT_EQ(got.fixed.device_count, 2u);
  ASSERT_EQ(got.devices.size(), 2u);
  EXPECT_STREQ(got.devices[1].pci_bus_id, "0000:11:00.0");
  EXPECT_EQ(got.devices[1].total_memory, 80ull << 30);
}

TEST(SocketProtocolTest, ShouldRoundTripWelcomeRefuseAndControl) {
  std::vector<std::uint8_t> msg;
  EncodeWelcome(Welcome{3, 99, 100000000}, &msg);
  MessageHeader h;
  Welcome w{};
  ASSERT_EQ(DecodeWelcome(PayloadOf(msg, &h), &w), DecodeError::kOk);
  EXPECT_EQ(w.client_id, 3u);
  EXPECT_EQ(w.heartbeat_interval_ns, 100000000u);
  msg.clear();
  EncodeRefuse(RefuseReason::kTooManyClients, "full", &msg);
  RefuseReason reason{};
  std::string text;
  ASSERT_EQ(DecodeRefuse(PayloadOf(msg, &h), &reason, &text), DecodeError::kOk);
  EXPECT_EQ(reason, RefuseReason::kTooManyClients);
  EXPECT_EQ(text, "full");
  msg.clear();
  ASSERT_TRUE(EncodeControl(MessageType::kControlRequest, R"({"command":"status"})", &msg));
  std::string json;
  ASSERT_EQ(DecodeControl(PayloadOf(msg, &h), &json), DecodeError::kOk);
  EXPECT_EQ(json, R"({"command":"status"})");
  EXPECT_EQ(h.type, static_cast<std::uint16_t>(MessageType::kControlRequest));
}

TEST(SocketProtocolTest, ShouldRefuseToEncodeOversizedControlAndTruncateRefuseText) {
  std::vector<std::uint8_t> msg;
  EXPECT_FALSE(
      EncodeControl(MessageType::kControlReply, std::string(kMaxPayloadBytes + 1, 'x'), &msg));
  EXPECT_TRUE(msg.empty());
  EncodeRefuse(RefuseReason::kBadMessage, std::string(kMaxPayloadBytes * 2, 'y'), &msg);
  MessageHeader h;
  RefuseReason reason{};
  std::string text;
  ASSERT_EQ(DecodeRefuse(PayloadOf(msg, &h), &reason, &text), DecodeError::kOk);
  EXPECT_EQ(text.size(), kMaxPayloadBytes - sizeof(RefuseFixed));
}

TEST(SocketProtocolTest, ShouldAcceptLongerPayloadFromNewerMinor) {
  std::vector<std::uint8_t> msg;
  EncodeHello(SampleHello(), &msg);
  msg.insert(msg.end(), 24, 0xab);  // fields a minor 1 appended after the device array
  Hello got;
  EXPECT_EQ(DecodeHello(std::span(msg).subspan(sizeof(MessageHeader)), &got), DecodeError::kOk);
  EXPECT_EQ(got.devices.size(), 2u);
  std::vector<std::uint8_t> welcome;
  EncodeWelcome(Welcome{1, 2, 3}, &welcome);
  welcome.insert(welcome.end(), 8, 0);
  Welcome w{};
  EXPECT_EQ(DecodeWelcome(std::span(welcome).subspan(sizeof(MessageHeader)), &w), DecodeError::kOk);
  // A header from a newer minor is fine; another major is not.
  MessageHeader h;
  msg[6] = static_cast<std::uint8_t>(kProtocolMinor + 3);
  EXPECT_EQ(DecodeHeader(msg, &h), DecodeError::kOk);
}

TEST(SocketProtocolTest, ShouldReportEveryHeaderError) {
  std::vector<std::uint8_t> msg;
  EncodeWelcome(Welcome{1, 2, 3}, &msg);
  MessageHeader h;
  for (std::size_t n = 0; n < sizeof(MessageHeader); ++n) {
    EXPECT_EQ(DecodeHeader(std::span(msg).first(n), &h), DecodeError::kIncomplete);
  }
  auto with = [&](auto edit) {
    MessageHeader m;
    std::memcpy(&m, msg.data(), sizeof(m));
    edit(&m);
    std::vector<std::uint8_t> bytes(sizeof(m));
    std::memcpy(bytes.data(), &m, sizeof(m));
    return DecodeHeader(bytes, &h);
  };
  EXPECT_EQ(with([](MessageHeader* m) { m->magic = 0x12345678; }), DecodeError::kBadMagic);
  EXPECT_EQ(with([](MessageHeader* m) { m->major = kProtocolMajor + 1; }),
            DecodeError::kMajorMismatch);
  EXPECT_EQ(with([](MessageHeader* m) { m->type = 0; }), DecodeError::kUnknownType);
  EXPECT_EQ(with([](MessageHeader* m) { m->type = 6; }), DecodeError::kUnknownType);
  EXPECT_EQ(with([](MessageHeader* m) { m->payload_bytes = kMaxPayloadBytes + 1; }),
            DecodeError::kPayloadTooLarge);
  EXPECT_EQ(with([](MessageHeader* m) { m->payload_bytes = kMaxPayloadBytes; }), DecodeError::kOk);
}

TEST(SocketProtocolTest, ShouldReportEveryHelloError) {
  std::vector<std::uint8_t> msg;
  EncodeHello(SampleHello(), &msg);
  const std::vector<std::uint8_t> payload(msg.begin() + sizeof(MessageHeader), msg.end());
  Hello got;
  // Every truncation: too small for the fixed part, then for the announced devices.
  for (std::size_t n = 0; n < payload.size(); ++n) {
    EXPECT_EQ(DecodeHello(std::span(payload).first(n), &got), DecodeError::kPayloadTooSmall) << n;
  }
  auto with = [&](auto edit) {
    auto bytes = payload;
    edit(bytes.data());
    return DecodeHello(bytes, &got);
  };
  auto fixed = [](std::uint8_t* p) { return reinterpret_cast<HelloFixed*>(p); };
  auto device = [](std::uint8_t* p, int i) {
    return reinterpret_cast<DeviceFacts*>(p + sizeof(HelloFixed) + i * sizeof(DeviceFacts));
  };
  EXPECT_EQ(with([&](std::uint8_t* p) { fixed(p)->layout_major = kLayoutMajor + 1; }),
            DecodeError::kMajorMismatch);
  EXPECT_EQ(with([&](std::uint8_t* p) { fixed(p)->pid = 0; }), DecodeError::kBadField);
  EXPECT_EQ(with([&](std::uint8_t* p) { fixed(p)->segment_bytes = 100; }), DecodeError::kBadField);
  EXPECT_EQ(with([&](std::uint8_t* p) { fixed(p)->device_count = kMaxDevices + 1; }),
            DecodeError::kBadField);
  EXPECT_EQ(with([&](std::uint8_t* p) { fixed(p)->device_count = 3; }),
            DecodeError::kPayloadTooSmall);
  EXPECT_EQ(with([&](std::uint8_t* p) { std::memset(device(p, 1)->pci_bus_id, 'a', 16); }),
            DecodeError::kBadField);
  EXPECT_EQ(with([&](std::uint8_t* p) { device(p, 0)->ordinal = -1; }), DecodeError::kBadField);
  EXPECT_EQ(with([&](std::uint8_t* p) { device(p, 0)->ordinal = kMaxDevices; }),
            DecodeError::kBadField);
  EXPECT_EQ(with([&](std::uint8_t* p) { device(p, 1)->host_numa_node = -2; }),
            DecodeError::kBadField);
  EXPECT_EQ(got.fixed.pid, 0);  // nothing was written on failure
  EXPECT_EQ(with([](std::uint8_t*) {}), DecodeError::kOk);
}

TEST(SocketProtocolTest, ShouldReportEveryWelcomeRefuseAndControlError) {
  Welcome w{};
  const Welcome good{1, 2, 3};
  std::vector<std::uint8_t> bytes(sizeof(good));
  std::memcpy(bytes.data(), &good, sizeof(good));
  EXPECT_EQ(DecodeWelcome(std::span(bytes).first(15), &w), DecodeError::kPayloadTooSmall);
  Welcome bad = good;
  bad.daemon_pid = -5;
  std::memcpy(bytes.data(), &bad, sizeof(bad));
  EXPECT_EQ(DecodeWelcome(bytes, &w), DecodeError::kBadField);
  bad = good;
  bad.heartbeat_interval_ns = 0;
  std::memcpy(bytes.data(), &bad, sizeof(bad));
  EXPECT_EQ(DecodeWelcome(bytes, &w), DecodeError::kBadField);

  RefuseReason reason{};
  std::string text;
  std::vector<std::uint8_t> refuse(sizeof(RefuseFixed) + 4, 'a');
  auto set_fixed = [&](std::uint32_t r, std::uint32_t n) {
    const RefuseFixed f{r, n};
    std::memcpy(refuse.data(), &f, sizeof(f));
  };
  EXPECT_EQ(DecodeRefuse(std::span(refuse).first(7), &reason, &text),
            DecodeError::kPayloadTooSmall);
  set_fixed(1, 5);
  EXPECT_EQ(DecodeRefuse(refuse, &reason, &text), DecodeError::kPayloadTooSmall);
  set_fixed(0, 4);
  EXPECT_EQ(DecodeRefuse(refuse, &reason, &text), DecodeError::kBadField);
  set_fixed(1, 4);
  refuse[sizeof(RefuseFixed) + 2] = 0;
  EXPECT_EQ(DecodeRefuse(refuse, &reason, &text), DecodeError::kBadField);
  set_fixed(99, 2);  // unknown reasons from a newer daemon are passed through
  EXPECT_EQ(DecodeRefuse(refuse, &reason, &text), DecodeError::kOk);
  EXPECT_EQ(static_cast<std::uint32_t>(reason), 99u);

  std::string json;
  EXPECT_EQ(DecodeControl({}, &json), DecodeError::kPayloadTooSmall);
  const std::uint8_t with_nul[] = {'{', 0, '}'};
  EXPECT_EQ(DecodeControl(with_nul, &json), DecodeError::kBadField);
  EXPECT_STRNE(ToString(DecodeError::kBadField), ToString(DecodeError::kIncomplete));
}

TEST(SocketProtocolTest, ShouldNeverCrashOnRandomPayloads) {
  std::mt19937_64 rng(2);
  std::vector<std::uint8_t> bytes;
  Hello hello;
  Welcome welcome;
  RefuseReason reason;
  std::string text;
  MessageHeader header;
  for (int i = 0; i < 3000; ++i) {
    bytes.resize(rng() % 300);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng() % 4 == 0 ? 0 : rng());
    DecodeHeader(bytes, &header);
    if (DecodeHello(bytes, &hello) == DecodeError::kOk) {
      EXPECT_LE(hello.devices.size(), kMaxDevices);
      EXPECT_GE(bytes.size(), sizeof(HelloFixed) + hello.devices.size() * sizeof(DeviceFacts));
    }
    DecodeWelcome(bytes, &welcome);
    DecodeRefuse(bytes, &reason, &text);
    DecodeControl(bytes, &text);
  }
}

}  // namespace
}  // namespace chameleon::ipc
