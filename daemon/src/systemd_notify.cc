#include "chameleon/daemon/systemd_notify.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

namespace chameleon::daemon {

namespace {

bool Notify(const std::string& message) {
  // unset_environment = 0: a reload or a later ping must still find NOTIFY_SOCKET.
  return sd_notify(0, message.c_str()) > 0;
}

// "<N>" prefixes with syslog priorities (sd-daemon.h SD_ERR ...), read by journald.
class SyslogPriorityFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const char* prefix = Prefix(msg.level);
    dest.append(prefix, prefix + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<SyslogPriorityFlag>();
  }

 private:
  static const char* Prefix(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::trace:
      case spdlog::level::debug:
        return SD_DEBUG;
      case spdlog::level::info:
        return SD_INFO;
      case spdlog::level::warn:
        return SD_WARNING;
      case spdlog::level::err:
        return SD_ERR;
      case spdlog::level::critical:
        return SD_CRIT;
      default:
        return SD_NOTICE;
    }
  }
};

}  // namespace

bool NotifyReady(const std::string& status) {
  return Notify(status.empty() ? "READY=1" : "READY=1\nSTATUS=" + status);
}
bool NotifyReloading() { return Notify("RELOADING=1"); }
bool NotifyStopping() { return Notify("STOPPING=1"); }
bool NotifyWatchdog() { return Notify("WATCHDOG=1"); }
bool NotifyStatus(const std::string& status) { return Notify("STATUS=" + status); }

std::uint64_t WatchdogPingIntervalUs() {
  std::uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return 0;
  return usec / 2;
}

bool StderrIsJournal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  struct stat st {};
  if (fstat(STDERR_FILENO, &st) != 0) return false;
  unsigned long long dev = 0, ino = 0;
  char tail = 0;
  // Exactly "DEV:INO"; anything else (garbage in an inherited variable) means not the journal.
  if (std::sscanf(stream, "%llu:%llu%c", &dev, &ino, &tail) != 2) return false;
  return dev == static_cast<unsigned long long>(st.st_dev) &&
         ino == static_cast<unsigned long long>(st.st_ino);
}

void ApplyLogPattern(spdlog::logger& logger, bool journal) {
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (journal) {
    formatter->add_flag<SyslogPriorityFlag>('*').set_pattern("%*%v");
  } else {
    formatter->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
  }
  logger.set_formatter(std::move(formatter));
}

void ConfigureServiceLogging(const std::string& level) {
  auto logger = std::make_shared<spdlog::logger>("chameleond",
                                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
  ApplyLogPattern(*logger, StderrIsJournal());
  logger->set_level(spdlog::level::from_str(level));
  // Warnings and errors reach the journal at once; info lines may wait for the next flush.
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace chameleon::daemon
