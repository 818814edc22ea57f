// Bad inputs, dead clients, many short-lived clients, permissions and metrics.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <fstream>
#include <sstream>

#include "chameleon/ipc/event_ring_layout.h"
#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

class RobustnessTest : public DaemonTest {
 protected:
  /// Sends raw bytes (and optionally a descriptor) on a fresh connection; returns the type of
  /// the daemon's reply, or 0 when it closed the connection without one.
  int SendRaw(const std::vector<std::uint8_t>& bytes, int fd = -1) {
    const int sock = ipc::ConnectUnix(options_.socket_path, 2000);
    EXPECT_GE(sock, 0);
    EXPECT_EQ(ipc::SendWithFd(sock, bytes, fd), 0);
    ipc::MessageHeader header{};
    std::vector<std::uint8_t> payload;
    int received = -1;
    ipc::DecodeError error{};
    const int rc = ipc::ReceiveMessage(sock, 5000, &header, &payload, &received, &error);
    close(sock);
    return rc == 0 ? header.type : 0;
  }
  static std::vector<std::uint8_t> HelloBytes(std::uint64_t segment_bytes, std::uint16_t major) {
    ipc::Hello hello;
    hello.fixed.layout_major = major;
    hello.fixed.pid = getpid();
    hello.fixed.segment_bytes = segment_bytes;
    std::vector<std::uint8_t> bytes;
    ipc::EncodeHello(hello, &bytes);
    return bytes;
  }
  /// The daemon keeps serving: a well-behaved client still gets in afterwards.
  void ExpectStillServing() {
    auto client = Connect();
    ASSERT_NE(client, nullptr);
    EXPECT_TRUE(Describe(client->id()).is_object());
  }
  static constexpr int kRefuse = static_cast<int>(ipc::MessageType::kRefuse);
};

TEST_F(RobustnessTest, MalformedHeaderIsRefusedAndCounted) {
  StartDaemon();
  std::vector<std::uint8_t> bytes = HelloBytes(4096, ipc::kLayoutMajor);
  bytes[0] ^= 0xff;  // magic
  EXPECT_EQ(SendRaw(bytes), kRefuse);
  EXPECT_EQ(BadInput("malformed_message"), 1u);
  ExpectStillServing();
}

TEST_F(RobustnessTest, OversizedMessageIsRefusedAndCounted) {
  StartDaemon();
  std::vector<std::uint8_t> bytes = HelloBytes(4096, ipc::kLayoutMajor);
  ipc::MessageHeader header{};
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.payload_bytes = ipc::kMaxPayloadBytes + 1;
  std::memcpy(bytes.data(), &header, sizeof(header));
  bytes.resize(sizeof(header) + 100000, 0x5a);
  EXPECT_EQ(SendRaw(bytes), kRefuse);
  EXPECT_EQ(BadInput("oversized_message"), 1u);
  ExpectStillServing();
}

TEST_F(RobustnessTest, TruncatedHelloPayloadIsRefused) {
  StartDaemon();
  std::vector<std::uint8_t> bytes = HelloBytes(4096, ipc::kLayoutMajor);
  ipc::MessageHeader header{};
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.payload_bytes = 8;  // shorter than HelloFixed
  std::memcpy(bytes.data(), &header, sizeof(header));
  bytes.resize(sizeof(header) + 8);
  EXPECT_EQ(SendRaw(bytes), kRefuse);
  EXPECT_EQ(BadInput("malformed_message"), 1u);
  ExpectStillServing();
}

TEST_F(RobustnessTest, WrongVersionsAreRefusedAndCounted) {
  StartDaemon();
  std::vector<std::uint8_t> bytes = HelloBytes(4096, ipc::kLayoutMajor);
  ipc::MessageHeader header{};
  std::memcpy(&header, bytes.data(), sizeof(header));
  header.major = ipc::kProtocolMajor + 1;
  std::memcpy(bytes.data(), &header, sizeof(header));
  EXPECT_EQ(SendRaw(bytes), kRefuse);
  EXPECT_EQ(SendRaw(HelloBytes(4096, ipc::kLayoutMajor + 1)), kRefuse);
  EXPECT_EQ(BadInput("version_mismatch"), 2u);
  ExpectStillServing();
}

TEST_F(RobustnessTest, DescriptorThatIsNotASegmentIsRefused) {
  StartDaemon();
  const int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(SendRaw(HelloBytes(4096, ipc::kLayoutMajor), fd), kRefuse);
  close(fd);
  EXPECT_EQ(SendRaw(HelloBytes(4096, ipc::kLayoutMajor)), kRefuse);  // no descriptor at all
  EXPECT_EQ(BadInput("bad_segment"), 2u);
  ExpectStillServing();
}

TEST_F(RobustnessTest, SegmentSizeDifferentFromHelloIsRefused) {
  StartDaemon();
  ipc::Segment segment;
  ASSERT_EQ(ipc::Segment::Create(SmallGeometry(), &segment), ipc::SegmentError::kOk);
  EXPECT_EQ(SendRaw(HelloBytes(segment.bytes() + 4096, ipc::kLayoutMajor), segment.fd()), kRefuse);
  EXPECT_EQ(BadInput("bad_segment"), 1u);
}

TEST_F(RobustnessTest, GarbageInTheRingDisconnectsOnlyThatClient) {
  StartDaemon();
  auto good = Connect();
  auto bad = Connect();
  ASSERT_NE(good, nullptr);
  ASSERT_NE(bad, nullptr);
  // A committed record whose length runs past the ring.
  auto* base = reinterpret_cast<std::uint8_t*>(bad->header());
  auto* descriptor = reinterpret_cast<ipc::EventRingDescriptor*>(base + bad->header()->ring_offset);
  auto* record = reinterpret_cast<ipc::RecordHeader*>(base + bad->header()->ring_offset +
                                                      sizeof(ipc::EventRingDescriptor));
  record->type = static_cast<std::uint16_t>(ipc::RecordType::kLaunch);
  record->length.store(0x7fffff00, std::memory_order_release);
  descriptor->tail.store(64, std::memory_order_release);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 1; }));
  EXPECT_EQ(BadInput("ring_corrupt"), 1u);
  EXPECT_TRUE(Describe(good->id()).is_object());
  EXPECT_TRUE(Describe(bad->id()).is_null());
}

TEST_F(RobustnessTest, RecordTooShortForItsTypeDisconnects) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto producer = client->segment().ring_producer();
  const std::uint32_t token = 20;
  ASSERT_EQ(producer.Push(ipc::RecordType::kLaunch, 0, &token, sizeof(token)),
            ipc::PushResult::kOk);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  EXPECT_EQ(BadInput("bad_record"), 1u);
}

TEST_F(RobustnessTest, OpTimesClaimingMoreEntriesThanTheyCarryDisconnect) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto producer = client->segment().ring_producer();
  // Count 5, one entry (op 0, 1 µs): the ring refuses it as a bad payload.
  const std::uint32_t bad[4] = {5, 0, 0, 1000};
  ASSERT_EQ(producer.Push(ipc::RecordType::kOpTimes, ipc::kFlagDetailed, bad, sizeof(bad)),
            ipc::PushResult::kOk);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  EXPECT_EQ(BadInput("bad_record"), 1u);
}

TEST_F(RobustnessTest, RecordOfAnUnknownTypeIsSkippedAndCountedNotFatal) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto producer = client->segment().ring_producer();
  const std::uint64_t future[3] = {1, 2, 3};  // a newer shim's record type
  ASSERT_EQ(producer.Push(static_cast<ipc::RecordType>(77), 0, future, sizeof(future)),
            ipc::PushResult::kOk);
  ASSERT_EQ(producer.Push(static_cast<ipc::RecordType>(77), 0, future, sizeof(future)),
            ipc::PushResult::kOk);
  // A layout-1.0 mark (32 bytes) after them is still read.
  ipc::IterationMarkRecord mark{1, 1, 0, 0, 0, 0, 0};
  ASSERT_EQ(producer.Push(ipc::RecordType::kIterationMark, 0, &mark, ipc::kIterationMarkV10Bytes),
            ipc::PushResult::kOk);
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    const auto d = Describe(client->id());
    return d.is_object() && d["records"]["iteration_marks"].get<int>() == 1;
  }));
  const auto d = Describe(client->id());
  EXPECT_EQ(d["records"]["unknown"].get<int>(), 2) << d.dump(2);
  // ... and exported per client slot.
  const std::string text = Control({{"command", "metrics"}})["text"];
  const std::string series =
      "chameleon_records_unknown_total{client=\"" + d["slot"].dump() + "\"} 2\n";
  EXPECT_NE(text.find(series), std::string::npos) << text;
  EXPECT_EQ(daemon_->clients(), 1u);
  EXPECT_EQ(BadInput("bad_record"), 0u);
  EXPECT_EQ(BadInput("ring_corrupt"), 0u);
}

class DeadWriterTest : public RobustnessTest {
  void Configure(DaemonOptions* options) override { options->stuck_record_timeout_ns = 50'000'000; }
};

TEST_F(DeadWriterTest, ClientKilledMidWriteIsRepairedThenReleased) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(client->Launch(20));
  // The writer claimed a record (negative length) and died before committing it.
  auto* base = reinterpret_cast<std::uint8_t*>(client->header());
  auto* descriptor =
      reinterpret_cast<ipc::EventRingDescriptor*>(base + client->header()->ring_offset);
  const std::uint64_t tail = descriptor->tail.load();
  auto* record = reinterpret_cast<ipc::RecordHeader*>(base + client->header()->ring_offset +
                                                      sizeof(ipc::EventRingDescriptor) + tail);
  record->type = static_cast<std::uint16_t>(ipc::RecordType::kLaunch);
  record->length.store(-32, std::memory_order_release);
  descriptor->tail.store(tail + 32, std::memory_order_release);
  // A new producer resumes at the shared tail, after the dead record.
  auto producer = client->segment().ring_producer();
  const ipc::LaunchRecord launch{21, 0, 0, 0};
  ASSERT_EQ(producer.Push(ipc::RecordType::kLaunch, 0, &launch, sizeof(launch)),
            ipc::PushResult::kOk);
  ASSERT_TRUE(WaitFor([&] {
    client->Heartbeat();
    auto d = Describe(client->id());
    return d["records"]["repaired"].get<int>() == 1 && d["records"]["drained"].get<int>() == 2;
  })) << Describe(client->id()).dump(2);
  client->Disconnect();  // the process is gone: its socket closes
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  ExpectStillServing();
}

class StaleHeartbeatTest : public RobustnessTest {
  void Configure(DaemonOptions* options) override { options->heartbeat_timeout_ns = 200'000'000; }
};

TEST_F(StaleHeartbeatTest, ClientWithoutHeartbeatIsReleased) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  EXPECT_EQ(BadInput("heartbeat_stale"), 1u);
  // The daemon's own heartbeat kept running meanwhile.
  EXPECT_GT(client->header()->daemon_heartbeat_ns.load(), 0u);
}

TEST_F(RobustnessTest, CleanExitSentinelReleasesTheClient) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  client->header()->client_exited.store(1);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
}

int CountFds() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

int CountSegmentMappings() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int n = 0;
  while (std::getline(maps, line)) n += line.find("memfd:") != std::string::npos;
  return n;
}

int CountSeries(const std::string& text, const std::string& family) {
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) n += line.rfind(family + "{", 0) == 0;
  return n;
}

TEST_F(RobustnessTest, ThousandShortLivedClientsLeaveNoLeaksAndBoundedSeries) {
  StartDaemon();
  {
    auto warm = Connect();  // first client creates the slot's series and the loop's buffers
  }
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  const int fds = CountFds();
  const int maps = CountSegmentMappings();
  for (int i = 0; i < 1000; ++i) {
    auto client = Connect();
    ASSERT_NE(client, nullptr) << "client " << i;
    ASSERT_TRUE(client->Launch(16 + i % 7));
  }
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }, 20000));
  // A per-client leak would show as ~1,000 more descriptors. The baseline itself may still hold
  // the warm client's socket while the loop finishes closing it (seen under TSan), so the count
  // may end lower than the baseline, never higher. Likewise the warm client's segment mapping
  // (seen under TSan: 1 at the baseline, 0 at the end). And the last client's mapping may
  // outlive the client count by a moment (seen under TSan: 1 against a baseline of 0).
  EXPECT_TRUE(WaitFor([&] { return CountFds() <= fds; })) << CountFds() << " > " << fds;
  EXPECT_TRUE(WaitFor([&] { return CountSegmentMappings() <= maps; }))
      << CountSegmentMappings() << " > " << maps;
  const std::string text = Control({{"command", "metrics"}})["text"];
  // One client at a time used slot 0 again and again: one series per family.
  EXPECT_EQ(CountSeries(text, "chameleon_client_stage"), 1);
  EXPECT_EQ(CountSeries(text, "chameleon_records_drained_total"), 1);
  EXPECT_NE(text.find("chameleon_client_connections_total 1001"), std::string::npos);
}

TEST_F(RobustnessTest, DisableAndEnableSetTheControlFlag) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  auto reply = Control({{"command", "disable"}, {"id", client->id()}});
  ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  EXPECT_NE(client->header()->control_flags.load() & ipc::kControlDisabled, 0u);
  EXPECT_TRUE(Describe(client->id())["disabled"].get<bool>());
  reply = Control({{"command", "enable"}, {"id", client->id()}});
  ASSERT_TRUE(reply["ok"].get<bool>());
  EXPECT_EQ(client->header()->control_flags.load() & ipc::kControlDisabled, 0u);
}

TEST_F(RobustnessTest, DisableIsDeniedToAnotherUid) {
  // Acting as another uid needs root. CI runs as root, so a non-root run fails here rather than
  // hiding the check behind a skip.
  ASSERT_EQ(geteuid(), 0u) << "this test needs root (it forks a client that drops to uid 65534)";
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  const pid_t child = fork();
  if (child == 0) {
    if (setuid(65534) != 0) _exit(2);
    const auto reply = control::ControlRequest(options_.socket_path,
                                               {{"command", "disable"}, {"id", client->id()}});
    const bool denied = !reply["ok"].get<bool>() && reply["error"].get<std::string>().find(
                                                        "permission denied") != std::string::npos;
    _exit(denied ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(client->header()->control_flags.load() & ipc::kControlDisabled, 0u);
  EXPECT_EQ(BadInput("permission_denied"), 1u);
}

TEST_F(RobustnessTest, ControlErrorsAreReportedNotFatal) {
  StartDaemon();
  EXPECT_FALSE(Control({{"command", "frobnicate"}})["ok"].get<bool>());
  EXPECT_FALSE(Control({{"command", "client"}, {"id", 12345}})["ok"].get<bool>());
  EXPECT_FALSE(Control({{"command", "client"}})["ok"].get<bool>());
  EXPECT_FALSE(Control({{"nothing", 1}})["ok"].get<bool>());
  EXPECT_EQ(BadInput("bad_control"), 2u);
  const auto status = Control({{"command", "status"}});
  ASSERT_TRUE(status["ok"].get<bool>());
  EXPECT_EQ(status["daemon"]["clients"], 0);
  EXPECT_GT(status["daemon"]["metrics_port"].get<int>(), 0);
}

TEST_F(RobustnessTest, MetricsEndpointServesTheFamilies) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 1; }));
  const int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(daemon_->metrics_port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n";
  ASSERT_EQ(send(sock, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string response;
  char buffer[4096];
  for (ssize_t n; (n = recv(sock, buffer, sizeof(buffer), 0)) > 0;) response.append(buffer, n);
  close(sock);
  for (const char* family :
       {"chameleon_clients 1", "chameleon_client_stage{client=\"0\"}",
        "chameleon_iteration_seconds", "chameleon_sequence_shifts_total",
        "chameleon_policy_generation_seconds_bucket", "chameleon_records_dropped_total",
        "chameleon_swap_bytes_total", "chameleon_detection_seconds", "chameleon_device_bytes_peak",
        "chameleon_host_pool_bytes"}) {
    EXPECT_NE(response.find(family), std::string::npos) << family;
  }
}

}  // namespace
}  // namespace chameleon::daemon::testing
