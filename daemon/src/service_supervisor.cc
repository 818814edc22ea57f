#include "chameleon/daemon/service_supervisor.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "chameleon/control/control_client.h"
#include "chameleon/daemon/service_flags.h"
#include "chameleon/daemon/systemd_notify.h"

namespace chameleon::daemon {

namespace {

std::uint64_t NowUs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::uint64_t(ts.tv_sec) * 1'000'000u + std::uint64_t(ts.tv_nsec) / 1000u;
}

// Without a watchdog the thread still wakes now and then; nothing depends on this period.
constexpr int kIdlePollMs = 1000;

sigset_t ServiceSignals() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : {SIGHUP, SIGTERM, SIGINT}) sigaddset(&set, sig);
  return set;
}

}  // namespace

void ServiceSupervisor::BlockServiceSignals() {
  const sigset_t set = ServiceSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

ServiceSupervisor::ServiceSupervisor(std::vector<std::string> args, ServiceConfig current,
                                     Hooks hooks, std::string default_config_path)
    : args_(std::move(args)),
      default_config_path_(std::move(default_config_path)),
      hooks_(std::move(hooks)),
      config_(std::move(current)) {
  if (!hooks_.loop_alive) {
    const std::string socket = config_.daemon.socket_path;
    // The loop must answer well within the ping period; a slow answer counts as a hang.
    hooks_.loop_alive = [socket] {
      return control::ControlRequest(socket, {{"command", "status"}}, 2000).value("ok", false);
    };
  }
}

ServiceSupervisor::~ServiceSupervisor() { Stop(); }

bool ServiceSupervisor::Start() {
  const sigset_t set = ServiceSignals();
  signal_fd_ = signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (signal_fd_ < 0 || stop_fd_ < 0) {
    spdlog::error("service supervisor: cannot watch SIGHUP: {}", std::strerror(errno));
    return false;
  }
  watchdog_interval_us_ = WatchdogPingIntervalUs();
  if (watchdog_interval_us_ > 0) {
    spdlog::info("systemd watchdog armed: pinging every {} ms", watchdog_interval_us_ / 1000);
  }
  thread_ = std::thread([this] { Run(); });
  return true;
}

void ServiceSupervisor::Stop() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    if (write(stop_fd_, &one, sizeof(one)) < 0) spdlog::warn("supervisor stop: {}", errno);
    thread_.join();
  }
  if (signal_fd_ >= 0) close(signal_fd_);
  if (stop_fd_ >= 0) close(stop_fd_);
  signal_fd_ = stop_fd_ = -1;
}

ServiceConfig ServiceSupervisor::config() const {
  std::lock_guard<std::mutex> lock(mu_);
  return config_;
}

void ServiceSupervisor::Run() {
  while (true) {
    const std::uint64_t now = NowUs();
    int timeout_ms = kIdlePollMs;
    if (watchdog_interval_us_ > 0) {
      const std::uint64_t due = last_ping_us_ + watchdog_interval_us_;
      timeout_ms = due <= now
                       ? 0
                       : static_cast<int>(std::min<std::uint64_t>((due - now) / 1000, kIdlePollMs));
    }
    pollfd fds[2] = {{signal_fd_, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, timeout_ms);
    if (ready > 0 && (fds[1].revents & POLLIN)) return;
    if (ready > 0 && (fds[0].revents & POLLIN)) {
      signalfd_siginfo info{};
      while (read(signal_fd_, &info, sizeof(info)) == sizeof(info)) {
        OnSignal(static_cast<int>(info.ssi_signo));
      }
    }
    MaybePing(NowUs());
  }
}

void ServiceSupervisor::MaybePing(std::uint64_t now_us) {
  if (watchdog_interval_us_ == 0 || now_us < last_ping_us_ + watchdog_interval_us_) return;
  last_ping_us_ = now_us;
  if (!hooks_.loop_alive()) {
    spdlog::warn("event loop did not answer; withholding the watchdog ping");
    return;
  }
  if (NotifyWatchdog()) watchdog_pings_.fetch_add(1);
}

void ServiceSupervisor::OnSignal(int signal) {
  if (signal == SIGHUP) {
    Reload();
    return;
  }
  if (stop_requested_.exchange(true)) return;  // a second SIGTERM changes nothing
  spdlog::info("signal {} received; stopping (clients keep running on their last policy)", signal);
  NotifyStopping();
  if (hooks_.stop) hooks_.stop();
}

void ServiceSupervisor::Reload() {
  NotifyReloading();
  const ServiceConfig current = config();
  const ReloadResult result = ReloadConfig(args_, current, default_config_path_);
  if (!result.applied) {
    reloads_rejected_.fetch_add(1);
    spdlog::error("reload rejected; keeping the running configuration:");
    for (const std::string& e : result.errors) spdlog::error("  {}", e);
    NotifyReady("reload rejected; running configuration kept (see journal)");
    return;
  }
  for (const std::string& key : result.needs_restart) {
    spdlog::warn("reload: {} changed; it needs a restart, the running value is kept", key);
  }
  spdlog::set_level(spdlog::level::from_str(result.config.log_level));
  {
    std::lock_guard<std::mutex> lock(mu_);
    config_ = result.config;
  }
  if (hooks_.apply) hooks_.apply(result.config);
  reloads_applied_.fetch_add(1);
  spdlog::info("configuration reloaded ({} key(s) changed)", result.changed.size());
  NotifyReady("configuration reloaded");
}

}  // namespace chameleon::daemon
