#include "fake_daemon.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>

#include <cerrno>
#include <chrono>

namespace chameleon::shim::testing {
namespace {

std::uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

}  // namespace

std::vector<std::uint64_t> Record::Tensors() const {
  std::vector<std::uint64_t> ids;
  if (type != ipc::RecordType::kLaunch || payload.size() < sizeof(ipc::LaunchRecord)) return ids;
  const auto rec = As<ipc::LaunchRecord>();
  for (std::size_t i = 0; i < rec.tensor_count; ++i) {
    const std::size_t off = sizeof(ipc::LaunchRecord) + i * 8;
    if (off + 8 > payload.size()) break;
    std::uint64_t id;
    std::memcpy(&id, payload.data() + off, 8);
    ids.push_back(id);
  }
  return ids;
}

std::vector<Record> FakeClient::Drain() {
  std::vector<Record> out;
  names_reader.ReadNew(
      [&](std::uint32_t token, std::string_view name) { names[token] = std::string(name); });
  while (consumer.Drain(
             [&](const ipc::RecordView& v) {
               out.push_back(Record{v.type, v.flags, {v.payload.begin(), v.payload.end()}});
             },
             4096, NowNs(), 5'000'000'000ull) > 0) {
  }
  names_reader.ReadNew(
      [&](std::uint32_t token, std::string_view name) { names[token] = std::string(name); });
  return out;
}

bool FakeDaemon::Start(const std::string& path) {
  path_ = path;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = false;
  }
  ::unlink(path.c_str());
  listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof(addr.sun_path)) return false;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0 || ::pipe2(wake_pipe_, O_CLOEXEC) != 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  thread_ = std::thread([this] { AcceptLoop(); });
  return true;
}

void FakeDaemon::Stop() {
  if (listen_fd_ < 0) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;  // releases an accept thread waiting in a held handshake
  }
  cv_.notify_all();
  const char c = 'x';
  const ssize_t ignored = ::write(wake_pipe_[1], &c, 1);
  (void)ignored;
  thread_.join();
  ::close(listen_fd_);
  ::close(wake_pipe_[0]);
  ::close(wake_pipe_[1]);
  listen_fd_ = -1;
  ::unlink(path_.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& c : clients_) {
    if (c->sock >= 0) ::close(c->sock);
    c->sock = -1;
  }
}

void FakeDaemon::AcceptLoop() {
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    if (fds[0].revents & POLLIN) {
      const int sock = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (sock < 0) continue;
      {
        std::unique_lock<std::mutex> lock(mu_);
        ++accepted_;
        cv_.notify_all();
        cv_.wait(lock, [&] { return !hold_ || stopping_; });
        if (stopping_) {
          ::close(sock);
          return;
        }
      }
      Handshake(sock);
    }
  }
}

void FakeDaemon::Handshake(int sock) {
  ipc::MessageHeader header{};
  std::vector<std::uint8_t> payload;
  int fd = -1;
  ipc::DecodeError derr{};
  auto client = std::make_unique<FakeClient>();
  if (ipc::ReceiveMessage(sock, 2000, &header, &payload, &fd, &derr) != 0 ||
      header.type != static_cast<std::uint16_t>(ipc::MessageType::kHello) ||
      ipc::DecodeHello(payload, &client->hello) != ipc::DecodeError::kOk || fd < 0 ||
      ipc::Segment::Attach(fd, &client->segment) != ipc::SegmentError::kOk) {
    if (fd >= 0 && !client->segment.valid()) ::close(fd);
    ::close(sock);
    return;
  }
  ipc::GetPeerCredentials(sock, &client->creds);
  client->sock = sock;
  client->consumer = client->segment.ring_consumer();
  client->names_reader = client->segment.name_reader();
  client->mailbox = client->segment.mailbox_writer();
  std::lock_guard<std::mutex> lock(mu_);
  client->id = next_id_++;
  ipc::Welcome welcome{client->id, static_cast<std::int32_t>(::getpid()), 100'000'000ull};
  std::vector<std::uint8_t> bytes;
  ipc::EncodeWelcome(welcome, &bytes);
  if (ipc::SendWithFd(sock, bytes, -1) != 0) {
    ::close(sock);
    return;
  }
  clients_.push_back(std::move(client));
  cv_.notify_all();
}

void FakeDaemon::HoldHandshakes(bool hold) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = hold;
  }
  cv_.notify_all();
}

std::size_t FakeDaemon::accepted() {
  std::lock_guard<std::mutex> lock(mu_);
  return accepted_;
}

bool FakeDaemon::WaitForClients(std::size_t count, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                      [&] { return clients_.size() >= count; });
}

std::size_t FakeDaemon::client_count() {
  std::lock_guard<std::mutex> lock(mu_);
  return clients_.size();
}

FakeClient* FakeDaemon::client(std::size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  return index < clients_.size() ? clients_[index].get() : nullptr;
}

void FakeDaemon::Disconnect(std::size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index < clients_.size() && clients_[index]->sock >= 0) {
    ::close(clients_[index]->sock);
    clients_[index]->sock = -1;
  }
}

}  // namespace chameleon::shim::testing
