#include "client.h"

#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/ipc/segment.h"
#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/ipc/unix_socket.h"
#include "device_facts.h"
#include "log.h"
#include "policy_sink.h"
#include "runtime.h"

namespace chameleon::shim {
namespace {

// How often the thread wakes while connected: heartbeat, counters, control flags, mailbox.
// 10 ms keeps a policy or disable request effective within one typical training step.
constexpr auto kTick = std::chrono::milliseconds(10);
// While the daemon's stage is not STABLE (candidates on trial, a detailed iteration asked for),
// the control flags and the mailbox are read this often, so that a candidate published during an
// iteration is installed at the next boundary even in a loop of a few milliseconds a step (each
// missed boundary is one more trial iteration, docs/detection.md §4). Only the mailbox and two
// header words are read: no lock the launch path takes, no counter copies (those stay at kTick).
constexpr auto kConvergingTick = std::chrono::milliseconds(2);
constexpr std::uint64_t kTickNs = 10'000'000;
// Waiting for WELCOME from the background thread (never the application's time).
constexpr int kBackgroundHandshakeMs = 1000;
// How long the thread waits for the answer to the first, synchronous attempt while records are
// staged. Longer than a background attempt's: giving up loses every staged op (the daemon's op
// counts stop being exact), and a daemon that accepted the connection is there, only slow (CI's
// loaded 2-core machine took more than 1 s). Staging is bounded by memory, not by this wait.
constexpr int kStagedHandshakeMs = 10000;
constexpr int kFirstRetryMs = 50;

std::uint64_t NowNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

/// How a connection attempt ended.
enum class Attempt {
  kAttached,
  kPending,  ///< HELLO sent, no answer yet: the socket stays open (Client::pending_)
  kFailed,
};

class Client {
 public:
  Client(Runtime* rt, PolicySink* sink) : rt_(rt), sink_(sink) {}

  /// Connect + HELLO + WELCOME within `timeout_ms`. kPending leaves the handshake open (only
  /// with `keep_pending`, else it is abandoned as kFailed).
  Attempt TryConnect(int timeout_ms, bool keep_pending);
  /// Waits up to `timeout_ms` more for the pending handshake's WELCOME.
  Attempt FinishHandshake(int timeout_ms);
  void Run();
  void Disconnect(const char* why);
  /// After a kPending synchronous attempt: records are staged until the handshake ends.
  void StartStaging();
  void NoteExit() {
    ipc::SegmentHeader* h = header_.load(std::memory_order_acquire);
    if (h == nullptr) return;
    // The executor's last figures (the timer may not have run since the last boundary).
    sink_->PublishCounters(h);
    h->client_exited.store(1, std::memory_order_release);
  }
  void ForgetAfterFork() {
    if (sock_ >= 0) ::close(sock_);
    sock_ = -1;
    AbandonPending();
    header_.store(nullptr, std::memory_order_relaxed);
    segment_ = ipc::Segment();  // unmaps the child's view only
  }
  ClientStatus Status() {
    ClientStatus s;
    s.connected = header_.load(std::memory_order_acquire) != nullptr;
    s.client_id = client_id_.load(std::memory_order_relaxed);
    s.connects = connects_.load(std::memory_order_relaxed);
    s.policy_generation = generation_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  void Tick();
  /// Control flags and the mailbox only (the converging tick between two full ones).
  void PollControl();
  bool PeerClosed();
  void PollPolicy();
  void Attach();
  /// AllocRecords of the live allocations (under the tracker mutex and the ring lock).
  void AnnounceLive();
  void AbandonPending() {
    if (pending_fd_ >= 0) ::close(pending_fd_);
    pending_fd_ = -1;
    pending_segment_ = ipc::Segment();
  }

  Runtime* rt_;
  PolicySink* sink_;  // the executor's side: policies in, figures out
  int sock_ = -1;     // owned by the thread (and the first, synchronous attempt before it exists)
  ipc::Segment segment_;
  // A handshake the synchronous attempt left open (the daemon accepted, WELCOME not read yet):
  // the thread finishes it on the same socket. Closing it instead would make the daemon see a
  // reset connection ("socket error") and make the shim lose the ops until a second attempt.
  int pending_fd_ = -1;
  ipc::Segment pending_segment_;
  std::uint64_t pending_deadline_ns_ = 0;
  ipc::PolicyMailboxReader mailbox_;
  std::atomic<ipc::SegmentHeader*> header_{nullptr};
  std::atomic<std::uint32_t> client_id_{0};
  std::atomic<std::uint64_t> connects_{0};
  std::atomic<std::uint64_t> generation_{0};
  std::uint64_t heartbeat_interval_ns_ = 0;
  std::uint64_t last_heartbeat_ns_ = 0;
  std::uint64_t last_tick_ns_ = 0;  // the last full Tick
  // The last policy's stage is not STABLE: poll at kConvergingTick (thread only).
  bool converging_ = true;
};

std::atomic<Client*> g_client{nullptr};  // set once per process (and again in a fork child)

Attempt Client::TryConnect(int timeout_ms, bool keep_pending) {
  const int fd = ipc::ConnectUnix(rt_->config.socket_path, timeout_ms);
  if (fd < 0) return Attempt::kFailed;
  ipc::SegmentGeometry geometry;
  geometry.ring_capacity = rt_->config.ring_bytes;
  ipc::Segment segment;
  const ipc::SegmentError err = ipc::Segment::Create(geometry, &segment);
  if (err != ipc::SegmentError::kOk) {
    Log(LogLevel::kWarn, "cannot create the shared segment: %s", ipc::ToString(err));
    ::close(fd);
    return Attempt::kFailed;
  }
  ipc::Hello hello;
  hello.fixed.layout_major = ipc::kLayoutMajor;
  hello.fixed.layout_minor = ipc::kLayoutMinor;
  hello.fixed.pid = static_cast<std::int32_t>(::getpid());
  hello.fixed.segment_bytes = segment.bytes();
  hello.devices = GatherDeviceFacts(rt_->driver.aux);
  hello.fixed.device_count = static_cast<std::uint32_t>(hello.devices.size());
  std::vector<std::uint8_t> bytes;
  ipc::EncodeHello(hello, &bytes);
  if (ipc::SendWithFd(fd, bytes, segment.fd()) != 0) {
    ::close(fd);
    return Attempt::kFailed;
  }
  pending_fd_ = fd;
  pending_segment_ = std::move(segment);
  const int budget_ms = keep_pending ? kStagedHandshakeMs : kBackgroundHandshakeMs;
  pending_deadline_ns_ = NowNs() + static_cast<std::uint64_t>(budget_ms) * 1000000ull;
  const Attempt a = FinishHandshake(timeout_ms);
  if (a != Attempt::kPending || keep_pending) return a;
  AbandonPending();
  return Attempt::kFailed;
}

Attempt Client::FinishHandshake(int timeout_ms) {
  // Only read once the answer is there: a receive that timed out half-way would lose framing.
  pollfd p{pending_fd_, POLLIN, 0};
  int n = 0;
  do {
    n = ::poll(&p, 1, std::max(timeout_ms, 0));
  } while (n < 0 && errno == EINTR);
  if (n == 0) return Attempt::kPending;
  const int fd = pending_fd_;
  ipc::Segment segment = std::move(pending_segment_);
  pending_fd_ = -1;
  pending_segment_ = ipc::Segment();
  ipc::MessageHeader header{};
  std::vector<std::uint8_t> payload;
  int received_fd = -1;
  ipc::DecodeError derr = ipc::DecodeError::kOk;
  // The answer has started to arrive: the rest of one small message follows at once.
  const int rc = n > 0 ? ipc::ReceiveMessage(fd, kBackgroundHandshakeMs, &header, &payload,
                                             &received_fd, &derr)
                       : -errno;
  if (received_fd >= 0) ::close(received_fd);
  ipc::Welcome welcome{};
  if (rc != 0 || header.type != static_cast<std::uint16_t>(ipc::MessageType::kWelcome) ||
      ipc::DecodeWelcome(payload, &welcome) != ipc::DecodeError::kOk) {
    if (rc == 0 && header.type == static_cast<std::uint16_t>(ipc::MessageType::kRefuse)) {
      ipc::RefuseReason reason{};
      std::string text;
      ipc::DecodeRefuse(payload, &reason, &text);
      Log(LogLevel::kWarn, "daemon refused this process: %s", text.c_str());
    }
    ::close(fd);
    return Attempt::kFailed;
  }
  sock_ = fd;
  segment_ = std::move(segment);
  segment_.CloseFd();  // the daemon holds its own reference now
  client_id_.store(welcome.client_id, std::memory_order_relaxed);
  heartbeat_interval_ns_ = welcome.heartbeat_interval_ns;
  Attach();
  connects_.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kInfo, "connected to %s as client %u", rt_->config.socket_path.c_str(),
      welcome.client_id);
  return Attempt::kAttached;
}

void Client::Attach() {
  ipc::SegmentHeader* h = segment_.header();
  h->client_heartbeat_ns.store(NowNs(), std::memory_order_relaxed);
  // The limit the daemon must plan for: known from the environment before the executor starts.
  const std::uint64_t limit = sink_->DeviceLimit();
  h->device_limit_bytes.store(limit != 0 ? limit : rt_->config.device_limit_bytes,
                              std::memory_order_release);
  const std::uint64_t own = sink_->OwnLimit();
  h->own_limit_bytes.store(own != 0 ? own : rt_->config.device_limit_bytes,
                           std::memory_order_release);
  mailbox_ = segment_.mailbox_reader();
  converging_ = true;  // a new session starts in WARMUP
  rt_->kernels.AttachNames(segment_.name_writer(), true, &h->names_dropped);
  std::lock_guard<std::mutex> lock(rt_->tracker_mu);
  rt_->telemetry.Attach(h, segment_.ring_producer(), [&] { AnnounceLive(); });
  if (const std::uint64_t lost = rt_->telemetry.staging_lost()) {
    Log(LogLevel::kWarn, "%llu records issued before the daemon answered were lost",
        static_cast<unsigned long long>(lost));
  }
  header_.store(h, std::memory_order_release);
}

void Client::StartStaging() {
  // Half the ring: the staged records must fit in the fresh ring at attach, with room to spare.
  const std::size_t bytes = static_cast<std::size_t>(rt_->config.ring_bytes / 2);
  std::lock_guard<std::mutex> lock(rt_->tracker_mu);
  rt_->telemetry.StartStaging(bytes, [&] { AnnounceLive(); });
}

void Client::AnnounceLive() {
  // The daemon learns the allocations made before it was there, oldest first.
  rt_->table.ForEach([&](const AllocationState& s) {
    ipc::AllocRecord r{};
    r.id = s.id;
    r.address = s.address;
    r.bytes = s.bytes;
    r.stream = s.stream;
    r.device = s.device;
    r.kind = s.kind;
    r.swappable = (s.flags.load(std::memory_order_relaxed) & kNeverSwap) ? 0 : 1;
    rt_->telemetry.PushAnnounceLocked(&r);
  });
}

void Client::Disconnect(const char* why) {
  Log(LogLevel::kInfo, "daemon connection closed (%s); running on, retrying in background", why);
  header_.store(nullptr, std::memory_order_release);
  rt_->telemetry.Detach();  // no producer touches the ring after this
  rt_->kernels.AttachNames(ipc::NameTableWriter(), false, nullptr);
  rt_->daemon_disabled.store(false, std::memory_order_relaxed);
  if (sock_ >= 0) ::close(sock_);
  sock_ = -1;
  mailbox_ = ipc::PolicyMailboxReader();
  segment_ = ipc::Segment();
}

bool Client::PeerClosed() {
  pollfd p{sock_, POLLIN, 0};
  const int n = ::poll(&p, 1, 0);
  if (n <= 0) return false;
  if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
  // The daemon sends nothing after WELCOME today; read and ignore anything it does send.
  char buf[256];
  const ssize_t got = ::recv(sock_, buf, sizeof(buf), MSG_DONTWAIT);
  return got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

void Client::PollPolicy() {
  const ipc::ReadResult r = mailbox_.Poll();
  if (r == ipc::ReadResult::kCorrupt) {
    Log(LogLevel::kWarn, "policy mailbox is corrupt; ignoring it");
    return;
  }
  if (r != ipc::ReadResult::kNew) return;
  ipc::Policy policy;
  const ipc::BlobError err = ipc::DecodePolicy(mailbox_.blob(), &policy);
  if (err != ipc::BlobError::kOk) {
    Log(LogLevel::kWarn, "rejected policy generation %llu: %s",
        static_cast<unsigned long long>(mailbox_.generation()), ipc::ToString(err));
    return;
  }
  rt_->telemetry.SetBoundary(policy.boundary);
  generation_.store(policy.summary.generation, std::memory_order_relaxed);
  converging_ = policy.summary.stage != static_cast<std::uint32_t>(ipc::Stage::kStable);
  // With an executor: applied at the next iteration boundary; Tick publishes the generation in
  // force. Without one, nothing will apply it: acknowledged here.
  if (!sink_->SetPolicy(policy)) {
    segment_.header()->policy_generation_applied.store(policy.summary.generation,
                                                       std::memory_order_relaxed);
  }
  if (rt_->config.debug_seqchange) {
    std::string sig;
    for (std::uint32_t t : policy.boundary) {
      std::string name = rt_->kernels.NameOf(t);
      sig += name.empty() ? std::to_string(t) : name;
      sig += ' ';
    }
    Log(LogLevel::kWarn,
        "seqchange: policy generation %llu stage %u, %llu ops/iteration, boundary [%s]",
        static_cast<unsigned long long>(policy.summary.generation), policy.summary.stage,
        static_cast<unsigned long long>(policy.summary.iteration_ops), sig.c_str());
  }
}

void Client::Tick() {
  ipc::SegmentHeader* h = segment_.header();
  const std::uint64_t now = NowNs();
  if (now - last_heartbeat_ns_ >= std::min<std::uint64_t>(heartbeat_interval_ns_, 10000000ull)) {
    h->client_heartbeat_ns.store(now, std::memory_order_relaxed);
    last_heartbeat_ns_ = now;
  }
  h->records_written.store(rt_->telemetry.written(), std::memory_order_relaxed);
  h->records_dropped.store(rt_->telemetry.dropped(), std::memory_order_relaxed);
  h->device_bytes_live.store(rt_->total_live.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
  h->device_bytes_peak.store(rt_->total_peak.load(std::memory_order_relaxed),
                             std::memory_order_relaxed);
  for (std::size_t d = 0; d < ipc::kSegmentDevicePeaks && d < kMaxDevices; ++d) {
    h->device_peak_bytes[d].store(rt_->device_peak[d].load(std::memory_order_relaxed),
                                  std::memory_order_relaxed);
  }
  sink_->PublishCounters(h);
  if (const std::uint64_t limit = sink_->DeviceLimit(); limit != 0) {
    h->device_limit_bytes.store(limit, std::memory_order_release);
  }
  if (const std::uint64_t own = sink_->OwnLimit(); own != 0) {
    h->own_limit_bytes.store(own, std::memory_order_release);
  }
  last_tick_ns_ = now;
  PollControl();
}

void Client::PollControl() {
  ipc::SegmentHeader* h = segment_.header();
  const std::uint32_t flags = h->control_flags.load(std::memory_order_acquire);
  rt_->daemon_disabled.store((flags & ipc::kControlDisabled) != 0, std::memory_order_relaxed);
  const std::uint32_t request = h->detail_request_seq.load(std::memory_order_acquire);
  rt_->telemetry.SetDetailRequest((flags & ipc::kControlDetailedIteration) ? request : 0);
  PollPolicy();
}

void Client::Run() {
  std::mutex mu;
  std::condition_variable cv;  // a timer: nothing notifies it, the thread lives as long as us
  int backoff_ms = kFirstRetryMs;
  std::uint64_t next_try = NowNs();
  for (;;) {
    if (pending_fd_ >= 0) {
      // The synchronous attempt's handshake: records are being staged meanwhile.
      const std::uint64_t now = NowNs();
      const int left_ms = now >= pending_deadline_ns_
                              ? 0
                              : static_cast<int>((pending_deadline_ns_ - now + 999999) / 1000000);
      Attempt a = FinishHandshake(left_ms);
      if (a == Attempt::kPending) {
        Log(LogLevel::kWarn, "the daemon did not answer within %d ms; retrying in background",
            kStagedHandshakeMs);
        AbandonPending();
        a = Attempt::kFailed;
      }
      if (a != Attempt::kAttached) {
        rt_->telemetry.StopStaging();
        next_try = NowNs() + static_cast<std::uint64_t>(backoff_ms) * 1000000ull;
      }
      continue;
    }
    if (sock_ < 0) {
      if (NowNs() >= next_try) {
        if (TryConnect(kBackgroundHandshakeMs, false) == Attempt::kAttached) {
          backoff_ms = kFirstRetryMs;
        } else {
          next_try = NowNs() + static_cast<std::uint64_t>(backoff_ms) * 1000000ull;
          backoff_ms = std::min(backoff_ms * 2, rt_->config.retry_max_ms);
        }
      }
    } else if (PeerClosed()) {
      Disconnect("peer closed");
      next_try = NowNs() + static_cast<std::uint64_t>(kFirstRetryMs) * 1000000ull;
    } else if (NowNs() - last_tick_ns_ >= kTickNs || !converging_) {
      Tick();
    } else {
      PollControl();
    }
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, sock_ >= 0 && converging_ ? kConvergingTick : kTick);
  }
}

}  // namespace

void StartClient(Runtime* rt, PolicySink* sink) {
  auto* client = new Client(rt, sink);  // lives as long as the process
  g_client.store(client, std::memory_order_release);
  if (rt->config.connect_timeout_ms > 0 &&
      client->TryConnect(rt->config.connect_timeout_ms, true) == Attempt::kPending) {
    // A daemon is there but slow to answer (a loaded machine): keep every record from now on
    // for it, so that its op counts stay exact. Runs before this call's own op is recorded.
    client->StartStaging();
  }
  std::thread([client] { client->Run(); }).detach();
}

void ClientForgetAfterFork() {
  Client* client = g_client.load(std::memory_order_acquire);
  if (client != nullptr) client->ForgetAfterFork();
  g_client.store(nullptr, std::memory_order_release);  // leaked on purpose (parent's locks)
}

ClientStatus GetClientStatus() {
  Client* client = g_client.load(std::memory_order_acquire);
  return client != nullptr ? client->Status() : ClientStatus{};
}

void ClientNoteExit() {
  Client* client = g_client.load(std::memory_order_acquire);
  if (client != nullptr) client->NoteExit();
}

}  // namespace chameleon::shim
