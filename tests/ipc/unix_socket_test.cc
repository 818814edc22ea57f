// UNIX socket helpers: descriptor passing across processes, timeouts, malformed input.
#include "chameleon/ipc/unix_socket.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

int OpenFdCount() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  while (readdir(d) != nullptr) ++n;
  closedir(d);
  return n;
}

struct SocketPair {
  SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0); }
  ~SocketPair() {
    for (int fd : fds) {
      if (fd >= 0) close(fd);
    }
  }
  int fds[2] = {-1, -1};
};

Hello HelloFor(const Segment& s) {
  Hello h;
  h.fixed.layout_major = kLayoutMajor;
  h.fixed.layout_minor = kLayoutMinor;
  h.fixed.pid = getpid();
  h.fixed.segment_bytes = s.bytes();
  return h;
}

// The child plays the daemon: receives HELLO + fd, maps the segment, reads the parent's records
// and name, answers through the mailbox and a WELCOME.
int DaemonChild(int sock, pid_t parent) {
  MessageHeader header;
  std::vector<std::uint8_t> payload;
  int fd = -1;
  DecodeError error;
  if (ReceiveMessage(sock, 10000, &header, &payload, &fd, &error) != 0) return 10;
  Hello hello;
  if (header.type != static_cast<std::uint16_t>(MessageType::kHello) ||
      DecodeHello(payload, &hello) != DecodeError::kOk || fd < 0) {
    return 11;
  }
  if ((fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0) return 12;
  PeerCredentials creds;
  if (GetPeerCredentials(sock, &creds) != 0 || creds.pid != parent || creds.uid != getuid()) {
    return 13;
  }
  Segment segment;
  if (Segment::Attach(fd, &segment) != SegmentError::kOk) return 14;
  if (segment.bytes() != hello.fixed.segment_bytes) return 15;
  EventRingConsumer consumer = segment.ring_consumer();
  std::uint64_t expected = 0;
  bool in_order = true;
  consumer.Drain([&](const RecordView& v) { in_order &= testing::LaunchSeq(v) == expected++; },
                 1000, 0, 1);
  if (!in_order || expected != 100) return 16;
  std::string name;
  NameTableReader names = segment.name_reader();
  names.ReadNew([&](std::uint32_t, std::string_view n) { name = n; });
  if (name != "flash_attn_fwd") return 17;
  const std::uint8_t blob[] = {'p', 'o', 'l'};
  if (segment.mailbox_writer().Publish(blob) != PublishResult::kOk) return 18;
  std::vector<std::uint8_t> welcome;
  EncodeWelcome(Welcome{7, getpid(), 1000000}, &welcome);
  return SendWithFd(sock, welcome, -1) == 0 ? 0 : 19;
}

TEST(UnixSocketTest, ShouldPassSegmentToAnotherProcessThatSeesOurWrites) {
  Segment segment;
  ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &segment), SegmentError::kOk);
  EventRingProducer producer = segment.ring_producer();
  for (int i = 0; i < 100; ++i) ASSERT_EQ(testing::PushLaunch(&producer, i), PushResult::kOk);
  ASSERT_TRUE(segment.name_writer().Append(16, "flash_attn_fwd"));
  SocketPair pair;
  const pid_t parent = getpid();
  const pid_t child = testing::ForkChild([&] { return DaemonChild(pair.fds[1], parent); });
  std::vector<std::uint8_t> hello;
  EncodeHello(HelloFor(segment), &hello);
  ASSERT_EQ(SendWithFd(pair.fds[0], hello, segment.fd()), 0);
  segment.CloseFd();  // the client drops its descriptor at once; the mapping stays
  MessageHeader header;
  std::vector<std::uint8_t> payload;
  int fd = -1;
  DecodeError error;
  ASSERT_EQ(ReceiveMessage(pair.fds[0], 10000, &header, &payload, &fd, &error), 0);
  EXPECT_EQ(fd, -1);
  Welcome welcome{};
  ASSERT_EQ(DecodeWelcome(payload, &welcome), DecodeError::kOk);
  EXPECT_EQ(welcome.daemon_pid, child);
  const int status = testing::WaitStatus(child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The child's writes are visible here: head moved, a policy arrived.
  PolicyMailboxReader reader = segment.mailbox_reader();
  ASSERT_EQ(reader.Poll(), ReadResult::kNew);
  EXPECT_EQ(std::string(reader.blob().begin(), reader.blob().end()), "pol");
  for (int i = 0; i < 100; ++i) ASSERT_EQ(testing::PushLaunch(&producer, i), PushResult::kOk);
}

class UnixListenerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/chameleon-ipc-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    path_ = dir_ + "/sock";
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path_.c_str());
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listener_, 0), 0);
  }
  void TearDown() override {
    close(listener_);
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  std::string dir_, path_;
  int listener_ = -1;
};

TEST_F(UnixListenerTest, ShouldConnectAndSeePeerCredentials) {
  const int client = ConnectUnix(path_, 1000);
  ASSERT_GE(client, 0);
  const int server = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(server, 0);
  PeerCredentials creds;
  ASSERT_EQ(GetPeerCredentials(server, &creds), 0);
  EXPECT_EQ(creds.pid, getpid());
  EXPECT_EQ(creds.uid, getuid());
  EXPECT_EQ(creds.gid, getgid());
  close(server);
  close(client);
}

TEST_F(UnixListenerTest, ShouldTimeOutWhenTheBacklogIsFull) {
  const int first = ConnectUnix(path_, 1000);  // backlog 0 still queues one connection
  ASSERT_GE(first, 0);
  const std::uint64_t start = MonotonicNowNs();
  EXPECT_EQ(ConnectUnix(path_, 100), -ETIMEDOUT);
  EXPECT_GE(MonotonicNowNs() - start, 90'000'000u);
  close(first);
}

TEST(UnixSocketTest, ShouldReportMissingOrOverlongPaths) {
  EXPECT_EQ(ConnectUnix("/nonexistent-dir-chameleon/sock", 100), -ENOENT);
  EXPECT_EQ(ConnectUnix(std::string(200, 'a'), 100), -ENAMETOOLONG);
  EXPECT_EQ(ConnectUnix("", 100), -ENAMETOOLONG);
}

TEST(UnixSocketTest, ShouldTimeOutWaitingForAMessage) {
  SocketPair pair;
  MessageHeader header;
  std::vector<std::uint8_t> payload;
  int fd = 0;
  DecodeError error;
  EXPECT_EQ(ReceiveMessage(pair.fds[0], 50, &header, &payload, &fd, &error), -ETIMEDOUT);
  EXPECT_EQ(fd, -1);
}

TEST(UnixSocketTest, ShouldReportResetOnATruncatedMessage) {
  SocketPair pair;
  std::vector<std::uint8_t> msg;
  EncodeWelcome(Welcome{1, 2, 3}, &msg);
  ASSERT_EQ(SendWithFd(pair.fds[1], std::span(msg).first(20), -1), 0);
  close(pair.fds[1]);
  pair.fds[1] = -1;
  MessageHeader header;
  std::vector<std::uint8_t> payload;
  int fd = 0;
  DecodeError error;
  EXPECT_EQ(ReceiveMessage(pair.fds[0], 1000, &header, &payload, &fd, &error), -ECONNRESET);
}

TEST(UnixSocketTest, ShouldRefuseABadHeaderAndCloseItsDescriptor) {
  SocketPair pair;
  std::vector<std::uint8_t> msg;
  EncodeWelcome(Welcome{1, 2, 3}, &msg);
  msg[0] ^= 0xff;  // magic
  const int before = OpenFdCount();
  ASSERT_EQ(SendWithFd(pair.fds[1], msg, pair.fds[1]), 0);
  MessageHeader header;
  std::vector<std::uint8_t> payload;
  int fd = 0;
  DecodeError error;
  EXPECT_EQ(ReceiveMessage(pair.fds[0], 1000, &header, &payload, &fd, &error), -EPROTO);
  EXPECT_EQ(error, DecodeError::kBadMagic);
  EXPECT_EQ(fd, -1);
  EXPECT_EQ(OpenFdCount(), before);
}

TEST(UnixSocketTest, ShouldKeepOneDescriptorAndCloseExtras) {
  SocketPair pair;
  std::vector<std::uint8_t> msg;
  EncodeWelcome(Welcome{1, 2, 3}, &msg);
  const int extras[2] = {pair.fds[1], pair.fds[1]};
  iovec iov{msg.data(), msg.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(extras))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof(control);
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(extras));
  std::memcpy(CMSG_DATA(c), extras, sizeof(extras));
  ASSERT_EQ(sendmsg(pair.fds[1], &m, 0), static_cast<ssize_t>(msg.size()));
  const int before = OpenFdCount();
  MessageHeader header;
  std::vector<std::uint8_t> payload;
  int fd = -1;
  DecodeError error;
  ASSERT_EQ(ReceiveMessage(pair.fds[0], 1000, &header, &payload, &fd, &error), 0);
  EXPECT_GE(fd, 0);
  EXPECT_NE(fcntl(fd, F_GETFD) & FD_CLOEXEC, 0);
  EXPECT_EQ(OpenFdCount(), before + 1);
  close(fd);
}

TEST(UnixSocketTest, ShouldRefuseToSendADescriptorWithoutBytes) {
  SocketPair pair;
  EXPECT_EQ(SendWithFd(pair.fds[0], {}, pair.fds[0]), -EINVAL);
  EXPECT_EQ(SendWithFd(pair.fds[0], {}, -1), 0);
}

}  // namespace
}  // namespace chameleon::ipc
