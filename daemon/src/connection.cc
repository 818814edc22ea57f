// Socket I/O of the daemon: accepting, non-blocking recvmsg with descriptor passing, message
// framing, HELLO, queued writes and closing. libuv pipes cannot hand out an arbitrary received
// descriptor (a memfd), so each socket is watched with uv_poll and read with recvmsg directly.
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "daemon_impl.h"

namespace chameleon::daemon {
namespace {

/// Control connections allowed beyond max_clients (chameleonctl, scrapers of the socket).
constexpr std::size_t kExtraConnections = 64;
/// A peer that does not read its replies is cut off past this much queued output.
constexpr std::size_t kMaxQueuedOutput = 64u << 20;
/// Descriptors accepted per recvmsg; more are closed and counted.
constexpr int kMaxFdsPerMessage = 4;
/// recvmsg calls per readiness event, so one chatty peer cannot starve the loop.
constexpr int kMaxReadsPerEvent = 16;

BadInput ReasonFor(ipc::DecodeError error) {
  switch (error) {
    case ipc::DecodeError::kMajorMismatch:
      return BadInput::kVersionMismatch;
    case ipc::DecodeError::kPayloadTooLarge:
      return BadInput::kOversizedMessage;
    default:
      return BadInput::kMalformedMessage;
  }
}

}  // namespace

void DaemonImpl::OnListenReadable() {
  for (;;) {
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        spdlog::warn("accept on {} failed: {}", options_.socket_path, std::strerror(errno));
      }
      if (errno == EINTR) continue;
      return;
    }
    if (connections_.size() >= options_.max_clients + kExtraConnections) {
      spdlog::warn("connection refused: {} connections open", connections_.size());
      metrics_.bad_input(BadInput::kTooManyClients).Increment();
      close(fd);
      continue;
    }
    auto* conn = new Connection;
    conn->daemon = this;
    conn->fd = fd;
    ipc::GetPeerCredentials(fd, &conn->creds);
    uv_poll_init(&loop_, &conn->poll, fd);
    conn->poll.data = conn;
    uv_poll_start(&conn->poll, UV_READABLE, [](uv_poll_t* h, int status, int events) {
      auto* c = static_cast<Connection*>(h->data);
      c->daemon->OnConnectionEvent(c, status, events);
    });
    connections_.insert(conn);
  }
}

void DaemonImpl::OnConnectionEvent(Connection* conn, int status, int events) {
  if (status < 0) {
    CloseConnection(conn, std::string("socket error: ") + uv_strerror(status));
    return;
  }
  if ((events & UV_WRITABLE) != 0) FlushOut(conn);
  if (!conn->closing && (events & UV_READABLE) != 0) ReadAvailable(conn);
}

void DaemonImpl::ReadAvailable(Connection* conn) {
  std::uint8_t buffer[16384];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  for (int round = 0; round < kMaxReadsPerEvent && !conn->closing; ++round) {
    iovec iov{buffer, sizeof(buffer)};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(conn->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        CloseConnection(conn, std::string("recvmsg: ") + std::strerror(errno));
      }
      return;
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        conn->fds.push_back(fd);
      }
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
      metrics_.bad_input(BadInput::kUnexpectedFd).Increment();
      spdlog::warn("peer pid {}: more than {} descriptors in one message; extra ones discarded",
                   conn->creds.pid, kMaxFdsPerMessage);
    }
    if (n == 0) {
      CloseConnection(conn, "socket closed by peer", true);
      return;
    }
    conn->in.insert(conn->in.end(), buffer, buffer + n);
    // Parse every whole message received so far.
    std::size_t consumed = 0;
    while (!conn->closing) {
      const std::span<const std::uint8_t> rest(conn->in.data() + consumed,
                                               conn->in.size() - consumed);
      ipc::MessageHeader header{};
      const ipc::DecodeError error = ipc::DecodeHeader(rest, &header);
      if (error == ipc::DecodeError::kIncomplete) break;
      if (error != ipc::DecodeError::kOk) {
        Refuse(conn, ipc::RefuseReason::kBadMessage, ReasonFor(error),
               std::string("bad message header: ") + ipc::ToString(error));
        return;
      }
      const std::size_t total = sizeof(header) + header.payload_bytes;
      if (rest.size() < total) break;
      if (!Dispatch(conn, header, rest.subspan(sizeof(header), header.payload_bytes))) return;
      consumed += total;
    }
    if (!conn->closing) conn->in.erase(conn->in.begin(), conn->in.begin() + consumed);
    if (static_cast<std::size_t>(n) < sizeof(buffer)) return;  // drained the socket
  }
}

bool DaemonImpl::Dispatch(Connection* conn, const ipc::MessageHeader& header,
                          std::span<const std::uint8_t> payload) {
  const auto type = static_cast<ipc::MessageType>(header.type);
  if (type == ipc::MessageType::kHello) {
    if (conn->session) {
      Refuse(conn, ipc::RefuseReason::kBadMessage, BadInput::kMalformedMessage,
             "second HELLO on one connection");
      return false;
    }
    HandleHello(conn, payload);
    return !conn->closing;
  }
  // Only HELLO carries a descriptor; any other is closed so a peer cannot make us hoard fds.
  if (!conn->fds.empty()) {
    metrics_.bad_input(BadInput::kUnexpectedFd).Increment();
    spdlog::warn("peer pid {}: descriptor attached to a non-HELLO message; closed",
                 conn->creds.pid);
    while (!conn->fds.empty()) {
      close(conn->fds.front());
      conn->fds.pop_front();
    }
  }
  if (type == ipc::MessageType::kControlRequest) {
    HandleControl(conn,
                  std::string_view(reinterpret_cast<const char*>(payload.data()), payload.size()));
    return !conn->closing;
  }
  Refuse(conn, ipc::RefuseReason::kBadMessage, BadInput::kMalformedMessage,
         "unexpected message type " + std::to_string(header.type));
  return false;
}

void DaemonImpl::HandleHello(Connection* conn, std::span<const std::uint8_t> payload) {
  ipc::Hello hello;
  const ipc::DecodeError error = ipc::DecodeHello(payload, &hello);
  if (error != ipc::DecodeError::kOk) {
    const bool version = error == ipc::DecodeError::kMajorMismatch;
    Refuse(conn, version ? ipc::RefuseReason::kVersionMismatch : ipc::RefuseReason::kBadMessage,
           version ? BadInput::kVersionMismatch : BadInput::kMalformedMessage,
           std::string("bad HELLO: ") + ipc::ToString(error));
    return;
  }
  if (conn->fds.empty()) {
    Refuse(conn, ipc::RefuseReason::kBadSegment, BadInput::kBadSegment,
           "HELLO without a segment descriptor (SCM_RIGHTS)");
    return;
  }
  const int fd = conn->fds.front();
  conn->fds.pop_front();
  ipc::Segment segment;
  const ipc::SegmentError attach = ipc::Segment::Attach(fd, &segment);  // owns fd from here
  if (attach != ipc::SegmentError::kOk) {
    Refuse(conn, ipc::RefuseReason::kBadSegment, BadInput::kBadSegment,
           std::string("segment rejected: ") + ipc::ToString(attach));
    return;
  }
  if (segment.bytes() != hello.fixed.segment_bytes) {
    Refuse(conn, ipc::RefuseReason::kBadSegment, BadInput::kBadSegment,
           "segment is " + std::to_string(segment.bytes()) + " bytes, HELLO says " +
               std::to_string(hello.fixed.segment_bytes));
    return;
  }
  const int slot = AllocateSlot();
  if (slot < 0) {
    Refuse(conn, ipc::RefuseReason::kTooManyClients, BadInput::kTooManyClients,
           "all " + std::to_string(options_.max_clients) + " client slots are in use");
    return;
  }
  ClientIdentity identity;
  identity.id = next_client_id_++;
  identity.slot = static_cast<std::uint32_t>(slot);
  identity.pid = conn->creds.pid;
  identity.uid = conn->creds.uid;
  identity.gid = conn->creds.gid;
  identity.hello = std::move(hello);
  const std::uint64_t bytes = segment.bytes();
  conn->session = std::make_shared<ClientSession>(std::move(identity), std::move(segment), options_,
                                                  &metrics_, MonotonicNs());
  conn->session->SetNode(&node_);
  const ClientIdentity& who = conn->session->identity();
  clients_[who.id] = conn;
  client_count = static_cast<int>(clients_.size());
  metrics_.connections().Increment();
  metrics_.clients().Set(double(clients_.size()));
  spdlog::info("client {} connected: pid {} uid {} slot {}, segment {} bytes, {} device(s)", who.id,
               who.pid, who.uid, who.slot, bytes, who.hello.devices.size());
  if (const std::string error = node_view_.AddClient(who.id, who.hello.devices); !error.empty())
    spdlog::warn("client {}: its devices are left out of the node view: {}", who.id, error);
  if (!who.hello.devices.empty()) {
    const ipc::DeviceFacts& own = who.hello.devices.front();
    conn->session->SetHostLink(HostLinkOf(
        node_view_.node(),
        std::string_view(own.pci_bus_id, strnlen(own.pci_bus_id, sizeof(own.pci_bus_id)))));
  }
  ipc::Welcome welcome{who.id, static_cast<std::int32_t>(getpid()), options_.heartbeat_interval_ns};
  std::vector<std::uint8_t> message;
  ipc::EncodeWelcome(welcome, &message);
  Send(conn, message);
}

void DaemonImpl::Refuse(Connection* conn, ipc::RefuseReason reason, BadInput counter,
                        const std::string& text) {
  metrics_.bad_input(counter).Increment();
  spdlog::warn("peer pid {} uid {}: {} ({}); disconnecting", conn->creds.pid, conn->creds.uid, text,
               BadInputName(counter));
  std::vector<std::uint8_t> message;
  ipc::EncodeRefuse(reason, text, &message);
  Send(conn, message);
  CloseConnection(conn, text);
}

void DaemonImpl::Send(Connection* conn, std::span<const std::uint8_t> bytes) {
  if (conn->closing) return;
  conn->out.insert(conn->out.end(), bytes.begin(), bytes.end());
  if (conn->out.size() - conn->out_sent > kMaxQueuedOutput) {
    CloseConnection(conn, "peer does not read its replies");
    return;
  }
  FlushOut(conn);
}

void DaemonImpl::FlushOut(Connection* conn) {
  while (conn->out_sent < conn->out.size()) {
    const ssize_t n = send(conn->fd, conn->out.data() + conn->out_sent,
                           conn->out.size() - conn->out_sent, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        if (!conn->writable_armed) {
          conn->writable_armed = true;
          uv_poll_start(&conn->poll, UV_READABLE | UV_WRITABLE, conn->poll.poll_cb);
        }
        return;
      }
      conn->out.clear();
      conn->out_sent = 0;
      if (!conn->closing) CloseConnection(conn, std::string("send: ") + std::strerror(errno));
      return;
    }
    conn->out_sent += static_cast<std::size_t>(n);
  }
  conn->out.clear();
  conn->out_sent = 0;
  if (conn->writable_armed && !conn->closing) {
    conn->writable_armed = false;
    uv_poll_start(&conn->poll, UV_READABLE, conn->poll.poll_cb);
  }
}

void DaemonImpl::CloseConnection(Connection* conn, const std::string& reason, bool clean) {
  if (conn->closing) return;
  conn->closing = true;
  if (conn->session) {
    const ClientIdentity& who = conn->session->identity();
    // A client that left cleanly may have written records since the last drain; a misbehaving
    // one is not read again.
    if (clean) conn->session->Finish(MonotonicNs());
    spdlog::info("client {} (pid {}) released: {} ({} records, {} ops read)", who.id, who.pid,
                 reason, conn->session->records_drained(), conn->session->ops());
    slots_[who.slot] = false;
    metrics_.ClearSlot(who.slot);
    metrics_.disconnects().Increment();
    clients_.erase(who.id);
    node_view_.RemoveClient(who.id);
    client_count = static_cast<int>(clients_.size());
    metrics_.clients().Set(double(clients_.size()));
    const std::uint32_t id = who.id;
    conn->session.reset();  // unmaps the segment
    // Its leases die with it; those on its GPU are revoked (docs/daemon.md "Node placement").
    RepublishClients(node_.ClientGone(id, MonotonicNs()));
  }
  for (int fd : conn->fds) close(fd);
  conn->fds.clear();
  // Unread input would turn close() into a reset that can destroy a REFUSE still in flight.
  std::uint8_t sink[16384];
  for (int i = 0; i < 16 && recv(conn->fd, sink, sizeof(sink), MSG_DONTWAIT) > 0; ++i) {
  }
  uv_poll_stop(&conn->poll);
  uv_close(reinterpret_cast<uv_handle_t*>(&conn->poll), [](uv_handle_t* h) {
    auto* c = static_cast<Connection*>(h->data);
    close(c->fd);
    c->daemon->connections_.erase(c);
    delete c;
  });
}

}  // namespace chameleon::daemon
