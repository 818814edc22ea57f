// Daemon lifecycle: binding, the loop and its timers, stopping, and the jobs that run on the
// libuv thread pool (boundary detection and candidate policies).
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "chameleon/daemon/daemon.h"
#include "chameleon/topology/host_memory.h"
#include "daemon_impl.h"

namespace chameleon::daemon {

std::uint64_t MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000'000ull + std::uint64_t(ts.tv_nsec);
}

namespace {

std::runtime_error SystemError(const std::string& what) {
  return std::runtime_error(what + ": " + std::strerror(errno));
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

DaemonImpl::DaemonImpl(DaemonOptions options) : options_(std::move(options)) {
  slots_.assign(options_.max_clients, false);
  started_ns_ = MonotonicNs();
}

DaemonImpl::~DaemonImpl() {
  CloseUpdates();
  if (loop_ready_) {
    // Run() was never called or returned early: close what Start() opened.
    uv_walk(
        &loop_,
        [](uv_handle_t* h, void*) {
          if (!uv_is_closing(h)) uv_close(h, nullptr);
        },
        nullptr);
    uv_run(&loop_, UV_RUN_DEFAULT);
    uv_loop_close(&loop_);
  }
  if (listen_fd_ >= 0) close(listen_fd_);
}

void DaemonImpl::BindSocket() {
  const std::string& path = options_.socket_path;
  sockaddr_un addr{};
  if (path.empty() || path.size() >= sizeof(addr.sun_path)) {
    throw std::runtime_error("socket path '" + path + "' is empty or longer than " +
                             std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  // A socket file left by a daemon that died is removed; a live daemon's is not.
  const int probe = ipc::ConnectUnix(path, 200);
  if (probe >= 0) {
    close(probe);
    throw std::runtime_error("another daemon is already listening on " + path);
  }
  unlink(path.c_str());
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) throw SystemError("socket");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    throw SystemError("cannot bind " + path);
  }
  if (chmod(path.c_str(), options_.socket_mode) != 0) throw SystemError("chmod " + path);
  if (listen(listen_fd_, 128) != 0) throw SystemError("listen on " + path);
}

void DaemonImpl::StartMetrics() {
  const std::string& listen = options_.metrics_listen;
  if (listen.empty()) return;
  const auto colon = listen.rfind(':');
  const std::string port = colon == std::string::npos ? "" : listen.substr(colon + 1);
  if (colon == 0 || port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    throw std::runtime_error("--metrics-listen '" + listen + "' is not HOST:PORT");
  }
  try {
    exposer_ = std::make_unique<prometheus::Exposer>(listen, 1);
  } catch (const std::exception& e) {
    throw std::runtime_error("cannot serve metrics on " + listen + ": " + e.what());
  }
  exposer_->RegisterCollectable(metrics_.registry());
  const auto ports = exposer_->GetListeningPorts();
  metrics_port = ports.empty() ? 0 : ports.front();
  spdlog::info("metrics on http://{}:{}/metrics", listen.substr(0, colon), metrics_port.load());
}

// The node's host memory, from the same source as the shims' pinned-host caps
// (topology/host_memory.h): reported once, so that an operator sees which figure the node runs on.
void DaemonImpl::ReportHostMemory() {
  topology::HostMemoryOptions where;
  if (const char* path = std::getenv("CHAMELEON_TOPOLOGY")) where.topology_path = path;
  const topology::HostMemory host = topology::ReadHostMemory(where);
  if (!host.warning.empty()) spdlog::warn("host memory: {}", host.warning);
  spdlog::info("host memory: {} bytes over {} NUMA node(s), from {}", host.total(),
               host.numa_bytes.size(), topology::HostMemorySourceName(host.source));
  metrics_.SetHostMemory(host.numa_bytes);
}

void DaemonImpl::Start() {
  BindSocket();
  ReportHostMemory();
  StartMetrics();
  uv_loop_init(&loop_);
  loop_ready_ = true;
  loop_.data = this;
  uv_poll_init(&loop_, &listen_poll_, listen_fd_);
  listen_poll_.data = this;
  uv_poll_start(&listen_poll_, UV_READABLE, [](uv_poll_t* h, int, int) {
    static_cast<DaemonImpl*>(h->data)->OnListenReadable();
  });
  uv_timer_init(&loop_, &drain_timer_);
  drain_timer_.data = this;
  uv_timer_start(
      &drain_timer_, [](uv_timer_t* h) { static_cast<DaemonImpl*>(h->data)->OnDrainTimer(); },
      options_.drain_interval_ms, options_.drain_interval_ms);
  uv_timer_init(&loop_, &housekeeping_timer_);
  housekeeping_timer_.data = this;
  uv_timer_start(
      &housekeeping_timer_,
      [](uv_timer_t* h) { static_cast<DaemonImpl*>(h->data)->OnHousekeepingTimer(); },
      options_.housekeeping_interval_ms, options_.housekeeping_interval_ms);
  uv_async_init(&loop_, &stop_async_,
                [](uv_async_t* h) { static_cast<DaemonImpl*>(h->data)->OnStop(); });
  stop_async_.data = this;
  StartUpdates();
  if (options_.handle_signals) {
    for (auto [handle, signum] : {std::pair{&sigint_, SIGINT}, std::pair{&sigterm_, SIGTERM}}) {
      uv_signal_init(&loop_, handle);
      handle->data = this;
      uv_signal_start(
          handle,
          [](uv_signal_t* h, int sig) {
            spdlog::info("signal {} received; stopping", sig);
            static_cast<DaemonImpl*>(h->data)->OnStop();
          },
          signum);
    }
  }
  spdlog::info("chameleond listening on {} (max {} clients, m={}, n={})", options_.socket_path,
               options_.max_clients, options_.detection.stage_m, options_.detection.stage_n);
}

int DaemonImpl::Run() {
  if (!loop_ready_) return 1;
  uv_run(&loop_, UV_RUN_DEFAULT);
  const int rc = uv_loop_close(&loop_);
  loop_ready_ = rc != 0;
  spdlog::info("chameleond stopped");
  return rc == 0 ? 0 : 1;
}

void DaemonImpl::Stop() {
  if (loop_ready_) uv_async_send(&stop_async_);
}

void DaemonImpl::OnStop() {
  if (stopping_) return;
  stopping_ = true;
  // Clients keep running on their last policy; they learn we are gone from daemon_exited.
  std::vector<Connection*> all(connections_.begin(), connections_.end());
  for (Connection* conn : all) {
    if (conn->session) conn->session->MarkDaemonExited();
    CloseConnection(conn, "daemon stopping");
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&listen_poll_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&drain_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&housekeeping_timer_), nullptr);
  uv_close(reinterpret_cast<uv_handle_t*>(&stop_async_), nullptr);
  CloseUpdates();
  uv_close(reinterpret_cast<uv_handle_t*>(&update_async_), nullptr);
  if (options_.handle_signals) {
    uv_close(reinterpret_cast<uv_handle_t*>(&sigint_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&sigterm_), nullptr);
  }
  close(listen_fd_);
  listen_fd_ = -1;
  unlink(options_.socket_path.c_str());
}

void DaemonImpl::OnDrainTimer() {
  const std::uint64_t now = MonotonicNs();
  std::vector<std::pair<Connection*, std::string>> failed;
  for (auto& [id, conn] : clients_) {
    ClientSession& session = *conn->session;
    if (session.Drain(now) != Health::kOk) {
      failed.emplace_back(conn, session.error());
      continue;
    }
    if (session.WantsDetection(now)) StartDetection(conn, now);
    if (session.WantsGeneration()) StartGeneration(conn);
  }
  for (auto& [conn, why] : failed) CloseConnection(conn, why);
}

void DaemonImpl::OnHousekeepingTimer() {
  const std::uint64_t now = MonotonicNs();
  struct Failed {
    Connection* conn;
    std::string why;
    bool clean;
  };
  std::vector<Failed> failed;
  for (auto& [id, conn] : clients_) {
    const Health health = conn->session->Housekeep(now);
    if (health != Health::kOk) {
      failed.push_back({conn, conn->session->error(), health == Health::kExited});
    }
  }
  for (auto& f : failed) CloseConnection(f.conn, f.why, f.clean);
  metrics_.clients().Set(double(clients_.size()));
  RunNodeRound(now);
}

Connection* DaemonImpl::FindClient(std::uint32_t id) {
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second;
}

// Jobs run on the libuv thread pool. Each owns copies of its inputs; the result is installed on
// the loop thread only if the client is still connected (looked up by id, never by pointer).
struct Jobs {
  struct Detection {
    uv_work_t req{};
    DaemonImpl* daemon = nullptr;
    std::uint32_t client = 0;
    std::vector<std::uint32_t> tokens;
    DetectionOptions options;
    std::optional<Boundary> boundary;
    std::optional<IterationTracker> tracker;
    double seconds = 0;
  };
  struct Generation {
    uv_work_t req{};
    DaemonImpl* daemon = nullptr;
    std::uint32_t client = 0;
    std::shared_ptr<const policy::Profile> profile;
    policy::GeneratorOptions options;
    CandidateResult result;
  };

  static void Detect(uv_work_t* req) {
    auto* job = static_cast<Detection*>(req->data);
    const auto start = std::chrono::steady_clock::now();
    BoundaryParams params;
    params.min_periods = job->options.min_periods;
    params.max_gram =
        std::min<std::uint32_t>(job->options.max_gram, IterationTracker::kMaxSignature);
    params.gap_tolerance = job->options.gap_tolerance;
    params.min_period = job->options.min_period_ops;
    params.stability = {job->options.similarity_threshold, job->options.length_change_threshold};
    job->boundary = DetectBoundary(job->tokens, params);
    if (job->boundary) {
      // Replay the history so iterations that already ran count as steps.
      job->tracker.emplace(job->boundary->signature, job->options);
      // From the first boundary on: the set-up ops before it could hold stray matches.
      for (std::size_t i = job->boundary->first; i < job->tokens.size(); ++i) {
        job->tracker->Add(job->tokens[i]);
      }
    }
    job->seconds = SecondsSince(start);
  }

  static void Detected(uv_work_t* req, int) {
    std::unique_ptr<Detection> job(static_cast<Detection*>(req->data));
    job->daemon->metrics_.detection_seconds().Observe(job->seconds);
    Connection* conn = job->daemon->FindClient(job->client);
    if (conn == nullptr || job->daemon->stopping_) return;
    conn->session->InstallDetection(std::move(job->boundary), std::move(job->tracker),
                                    job->tokens.size());
  }

  static void Generate(uv_work_t* req) {
    auto* job = static_cast<Generation*>(req->data);
    const auto start = std::chrono::steady_clock::now();
    policy::GenerateResult generated = policy::GeneratePlan(*job->profile, job->options);
    job->result.ok = generated.ok();
    job->result.message = generated.message;
    if (generated.ok()) job->result.policy = policy::ToIpcPolicy(generated.plan, *job->profile);
    job->result.seconds = SecondsSince(start);
  }

  static void Generated(uv_work_t* req, int) {
    std::unique_ptr<Generation> job(static_cast<Generation*>(req->data));
    job->daemon->metrics_.generation_seconds().Observe(job->result.seconds);
    Connection* conn = job->daemon->FindClient(job->client);
    if (conn == nullptr || job->daemon->stopping_) return;
    conn->session->InstallCandidate(std::move(job->result));
  }
};

void DaemonImpl::StartDetection(Connection* conn, std::uint64_t now_ns) {
  auto job = std::make_unique<Jobs::Detection>();
  job->daemon = this;
  job->client = conn->session->identity().id;
  job->tokens = conn->session->TakeDetectionSnapshot(now_ns);
  job->options = options_.detection;
  job->req.data = job.get();
  if (uv_queue_work(&loop_, &job->req, Jobs::Detect, Jobs::Detected) == 0) {
    (void)job.release();  // the loop owns it until Jobs::Detected
  }
}

void DaemonImpl::StartGeneration(Connection* conn) {
  auto job = std::make_unique<Jobs::Generation>();
  job->daemon = this;
  job->client = conn->session->identity().id;
  auto [profile, options] = conn->session->TakeGeneration(&job->result);
  job->profile = std::move(profile);
  job->options = options;
  job->req.data = job.get();
  if (uv_queue_work(&loop_, &job->req, Jobs::Generate, Jobs::Generated) == 0) {
    (void)job.release();  // the loop owns it until Jobs::Generated
  }
}

int DaemonImpl::AllocateSlot() {
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i]) {
      slots_[i] = true;
      return static_cast<int>(i);
    }
  }
  return -1;
}

// --- Daemon: the public face. ---

Daemon::Daemon(DaemonOptions options) : impl_(std::make_unique<DaemonImpl>(std::move(options))) {}
Daemon::~Daemon() = default;
void Daemon::Start() { impl_->Start(); }
int Daemon::Run() { return impl_->Run(); }
void Daemon::Stop() { impl_->Stop(); }
bool Daemon::UpdateOptions(DaemonOptions options) {
  return impl_->UpdateOptions(std::move(options));
}
std::uint64_t Daemon::options_updates() const { return impl_->options_updates.load(); }
int Daemon::metrics_port() const { return impl_->metrics_port.load(); }
int Daemon::clients() const { return impl_->client_count.load(); }

}  // namespace chameleon::daemon
