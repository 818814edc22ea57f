// A client process as the daemon sees it, built from the ipc library alone (no shim): creates a
// segment, connects, passes the segment with HELLO and writes records into the ring.
#pragma once

#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/segment.h"
#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/ipc/unix_socket.h"
#include "device_facts.h"

namespace chameleon::daemon::testing {

inline std::uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000ull + std::uint64_t(ts.tv_nsec);
}

/// Small regions: the tests create thousands of clients.
inline ipc::SegmentGeometry SmallGeometry() {
  ipc::SegmentGeometry g;
  g.ring_capacity = 1u << 20;
  g.names_capacity = 16u << 10;
  g.policy_slot_bytes = 64u << 10;
  return g;
}

class FakeClient {
 public:
  /// Connects and completes the handshake; nullptr (with *error) when the daemon refuses.
  /// `devices`: the HELLO's device facts (empty: one device of `device_memory` at bus
  /// 0000:01:00.0, ordinal 0); the first is the client's own GPU.
  static std::unique_ptr<FakeClient> Connect(const std::string& socket_path, std::string* error,
                                             std::uint64_t device_memory = 1ull << 30,
                                             ipc::SegmentGeometry geometry = SmallGeometry(),
                                             std::vector<ipc::DeviceFacts> devices = {}) {
    if (devices.empty()) devices.push_back(Device(0, "0000:01:00.0", device_memory));
    return ConnectWithDevices(socket_path, error, std::move(devices), geometry);
  }

  /// Connects with these device facts in HELLO (a client seeing several GPUs of a node).
  static std::unique_ptr<FakeClient> ConnectWithDevices(
      const std::string& socket_path, std::string* error, std::vector<ipc::DeviceFacts> devices,
      ipc::SegmentGeometry geometry = SmallGeometry()) {
    auto client = std::unique_ptr<FakeClient>(new FakeClient);
    if (ipc::Segment::Create(geometry, &client->segment_) != ipc::SegmentError::kOk) {
      *error = "segment create failed";
      return nullptr;
    }
    client->segment_.header()->client_heartbeat_ns.store(NowNs());
    client->sock_ = ipc::ConnectUnix(socket_path, 2000);
    if (client->sock_ < 0) {
      *error = "connect failed";
      return nullptr;
    }
    ipc::Hello hello;
    hello.fixed.layout_major = ipc::kLayoutMajor;
    hello.fixed.layout_minor = ipc::kLayoutMinor;
    hello.fixed.pid = getpid();
    hello.fixed.segment_bytes = client->segment_.bytes();
    hello.fixed.device_count = static_cast<std::uint32_t>(devices.size());
    hello.devices = std::move(devices);
    std::vector<std::uint8_t> message;
    ipc::EncodeHello(hello, &message);
    if (ipc::SendWithFd(client->sock_, message, client->segment_.fd()) != 0) {
      *error = "send failed";
      return nullptr;
    }
    ipc::MessageHeader header{};
    std::vector<std::uint8_t> payload;
    int fd = -1;
    ipc::DecodeError decode{};
    if (ipc::ReceiveMessage(client->sock_, 5000, &header, &payload, &fd, &decode) != 0) {
      *error = "no reply";
      return nullptr;
    }
    if (header.type != static_cast<std::uint16_t>(ipc::MessageType::kWelcome)) {
      ipc::RefuseReason reason{};
      ipc::DecodeRefuse(payload, &reason, error);
      return nullptr;
    }
    ipc::Welcome welcome{};
    ipc::DecodeWelcome(payload, &welcome);
    client->id_ = welcome.client_id;
    client->segment_.CloseFd();  // as the shim does once the daemon has it
    client->ring_ = client->segment_.ring_producer();
    client->names_ = client->segment_.name_writer();
    return client;
  }

  /// One HELLO device row.
  static ipc::DeviceFacts Device(std::int32_t ordinal, const char* bus_id, std::uint64_t memory,
                                 std::uint64_t peer_mask = 0) {
    return MakeDeviceFacts(ordinal, bus_id, memory, peer_mask);
  }

  ~FakeClient() {
    if (sock_ >= 0) close(sock_);
  }

  std::uint32_t id() const { return id_; }
  ipc::SegmentHeader* header() { return segment_.header(); }
  /// The daemon asks for a detailed iteration (the control flag in the segment header).
  bool DetailedRequested() {
    return (header()->control_flags.load() & ipc::kControlDetailedIteration) != 0;
  }
  ipc::Segment& segment() { return segment_; }
  void Disconnect() {
    close(sock_);
    sock_ = -1;
  }
  void Heartbeat() { header()->client_heartbeat_ns.store(NowNs(), std::memory_order_release); }
  bool Name(std::uint32_t token, const std::string& name) { return names_.Append(token, name); }

  bool Launch(std::uint32_t token, const std::vector<std::uint64_t>& tensors = {},
              std::uint16_t flags = 0) {
    ipc::LaunchRecord launch{token, static_cast<std::uint16_t>(tensors.size()), 0, 0};
    return Count(ring_.Push2(ipc::RecordType::kLaunch, flags, &launch, sizeof(launch),
                             tensors.data(), tensors.size() * sizeof(std::uint64_t)));
  }
  bool Alloc(std::uint64_t id, std::uint64_t bytes, std::uint16_t flags = 0) {
    ipc::AllocRecord alloc{id, 0x7000000000ull + id * 4096, bytes, 0, 0, 0, 1, 0};
    return Count(ring_.Push(ipc::RecordType::kAlloc, flags, &alloc, sizeof(alloc)));
  }
  bool Free(std::uint64_t id, std::uint16_t flags = 0) {
    ipc::FreeRecord free{id, 0};
    return Count(ring_.Push(ipc::RecordType::kFree, flags, &free, sizeof(free)));
  }
  bool MemInfo(std::uint64_t bytes_live, std::uint16_t flags = ipc::kFlagDetailed) {
    ipc::MemInfoRecord info{bytes_live, 0, {0, 0, 0}};
    return Count(ring_.Push(ipc::RecordType::kMemInfo, flags, &info, sizeof(info)));
  }
  /// A layout-1.0 mark (32 bytes: no timed interval, no generation), as an older shim sends.
  bool Mark(std::uint64_t iteration, std::uint64_t device_time_ns, std::uint64_t ops) {
    ipc::IterationMarkRecord mark{iteration, NowNs(), device_time_ns, ops, 0, 0, 0};
    return Count(
        ring_.Push(ipc::RecordType::kIterationMark, 0, &mark, ipc::kIterationMarkV10Bytes));
  }
  /// A layout-1.1 mark: boundary `iteration` with `generation` in force, carrying the device
  /// time of interval `timed` (0: none).
  /// `flags`: the record's RecordFlag bits (kFlagGenerationInstalled: the executor installed
  /// `generation` at this boundary).
  /// `executor_wait_ns` (with kFlagExecutorWait in `flags`): the executor's measured waits in
  /// interval `timed` (layout 1.7).
  bool MarkTimed(std::uint64_t iteration, std::uint64_t generation, std::uint64_t timed,
                 std::uint64_t device_time_ns, std::uint16_t flags = 0,
                 std::uint64_t executor_wait_ns = 0) {
    ipc::IterationMarkRecord mark{iteration, NowNs(),    device_time_ns,  0,
                                  timed,     generation, executor_wait_ns};
    return Count(ring_.Push(ipc::RecordType::kIterationMark, flags, &mark, sizeof(mark)));
  }
  /// What the shim's pointer-table scan reports (layout 1.2): allocations pointed to.
  bool PointerTargets(std::uint64_t scan, const std::vector<std::uint64_t>& ids) {
    ipc::PointerTargetsRecord head{static_cast<std::uint32_t>(ids.size()), 0, scan};
    return Count(ring_.Push2(ipc::RecordType::kPointerTargets, 0, &head, sizeof(head), ids.data(),
                             ids.size() * sizeof(std::uint64_t)));
  }
  /// The device times of detailed ops (layout 1.8), sent before the mark that closes the
  /// detailed iteration.
  bool OpTimes(const std::vector<ipc::OpTime>& times) {
    ipc::OpTimesRecord head{static_cast<std::uint32_t>(times.size()), 0};
    return Count(ring_.Push2(ipc::RecordType::kOpTimes, ipc::kFlagDetailed, &head, sizeof(head),
                             times.data(), times.size() * sizeof(ipc::OpTime)));
  }
  /// Records pushed so far (what the daemon should eventually have drained).
  std::uint64_t pushed() const { return pushed_; }

 private:
  FakeClient() = default;
  bool Count(ipc::PushResult result) {
    if (result != ipc::PushResult::kOk) return false;
    ++pushed_;
    header()->records_written.store(pushed_, std::memory_order_relaxed);
    return true;
  }

  ipc::Segment segment_;
  ipc::EventRingProducer ring_;
  ipc::NameTableWriter names_;
  int sock_ = -1;
  std::uint32_t id_ = 0;
  std::uint64_t pushed_ = 0;
};

}  // namespace chameleon::daemon::testing
