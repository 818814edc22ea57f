// Blocking UNIX-socket helpers with timeouts and descriptor passing. See unix_socket.h.
#include "chameleon/ipc/unix_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace chameleon::ipc {
namespace {

// Room for a few descriptors: a peer that sends more than one gets the extras closed, not leaked.
constexpr int kMaxFdsPerMessage = 4;

std::int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Waits until `sock` is readable or the deadline passes. 0, -ETIMEDOUT or -errno.
int WaitReadable(int sock, std::int64_t deadline_ms) {
  for (;;) {
    const std::int64_t left = deadline_ms - NowMs();
    if (left <= 0) return -ETIMEDOUT;
    pollfd p{sock, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left));
    if (n > 0) return 0;  // readable, or HUP/ERR which recvmsg then reports
    if (n < 0 && errno != EINTR) return -errno;
  }
}

// Keeps the first descriptor carried by `msg` in *fd (if it holds none yet); closes the rest.
void CollectFds(msghdr* msg, int* fd) {
  for (cmsghdr* c = CMSG_FIRSTHDR(msg); c != nullptr; c = CMSG_NXTHDR(msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (*fd < 0) {
        *fd = received;
      } else {
        close(received);
      }
    }
  }
}

// Reads exactly `bytes` into `buffer` before the deadline, collecting passed descriptors.
int ReceiveExact(int sock, std::uint8_t* buffer, std::size_t bytes, std::int64_t deadline_ms,
                 int* fd) {
  std::size_t done = 0;
  while (done < bytes) {
    if (const int rc = WaitReadable(sock, deadline_ms); rc != 0) return rc;
    iovec iov{buffer + done, bytes - done};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return -errno;
    }
    CollectFds(&msg, fd);
    if (n == 0) return -ECONNRESET;  // peer closed mid-message (or before one)
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace

int ConnectUnix(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) return -ENAMETOOLONG;
  std::memcpy(addr.sun_path, path.data(), path.size());
  const int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return -errno;
  // A blocking AF_UNIX connect waits for room in the listener's backlog for at most the send
  // timeout; the same timeout then bounds every later blocking send on this socket.
  if (timeout_ms < 1) timeout_ms = 1;  // 0 would mean "no timeout" to the kernel
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  if (setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    const int err = errno;
    close(sock);
    return -err;
  }
  int rc = connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  while (rc != 0 && errno == EINTR) {
    rc = connect(sock, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
    if (rc != 0 && errno == EISCONN) rc = 0;
  }
  if (rc != 0) {
    const int err = (errno == EAGAIN || errno == EINPROGRESS) ? ETIMEDOUT : errno;
    close(sock);
    return -err;
  }
  return sock;
}

int SendWithFd(int sock, std::span<const std::uint8_t> bytes, int fd_to_pass) {
  if (bytes.empty()) return fd_to_pass >= 0 ? -EINVAL : 0;  // SCM_RIGHTS needs a byte to ride
  std::size_t sent = 0;
  bool fd_pending = fd_to_pass >= 0;
  while (sent < bytes.size()) {
    iovec iov{const_cast<std::uint8_t*>(bytes.data()) + sent, bytes.size() - sent};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fd_pending) {  // the descriptor rides with the first byte
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
    }
    const ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    fd_pending = false;
    sent += static_cast<std::size_t>(n);
  }
  return 0;
}

int ReceiveMessage(int sock, int timeout_ms, MessageHeader* header,
                   std::vector<std::uint8_t>* payload, int* received_fd, DecodeError* error) {
  const std::int64_t deadline = NowMs() + timeout_ms;
  int fd = -1;
  *received_fd = -1;
  *error = DecodeError::kOk;
  std::uint8_t raw[sizeof(MessageHeader)];
  int rc = ReceiveExact(sock, raw, sizeof(raw), deadline, &fd);
  if (rc == 0) {
    *error = DecodeHeader(raw, header);
    if (*error != DecodeError::kOk) rc = -EPROTO;
  }
  if (rc == 0) {
    payload->resize(header->payload_bytes);
    rc = ReceiveExact(sock, payload->data(), payload->size(), deadline, &fd);
  }
  if (rc != 0) {
    if (fd >= 0) close(fd);
    return rc;
  }
  *received_fd = fd;
  return 0;
}

int GetPeerCredentials(int sock, PeerCredentials* creds) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -errno;
  creds->pid = cred.pid;
  creds->uid = cred.uid;
  creds->gid = cred.gid;
  return 0;
}

}  // namespace chameleon::ipc
