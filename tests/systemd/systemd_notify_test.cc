// sd_notify messages reach a NOTIFY_SOCKET exactly as systemd reads them, the watchdog interval
// follows WATCHDOG_USEC/WATCHDOG_PID, journal detection follows JOURNAL_STREAM's dev:ino, and
// the journal log pattern carries a syslog priority and no timestamp. Each TEST runs in its own
// process (gtest_discover_tests), so changing the environment here is safe.
#include "chameleon/daemon/systemd_notify.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

namespace chameleon::daemon {
namespace {

/// A datagram socket standing in for systemd's notification socket.
class NotifySocket {
 public:
  NotifySocket() {
    path_ = "/tmp/chameleon-notify-" + std::to_string(getpid()) + ".sock";
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
    unlink(path_.c_str());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    setenv("NOTIFY_SOCKET", path_.c_str(), 1);
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
    unsetenv("NOTIFY_SOCKET");
  }
  bool bound() const { return bound_; }
  /// The next datagram (sd_notify sends synchronously, so it is already queued).
  std::string Receive() {
    char buf[512];
    const ssize_t n = recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    return n < 0 ? std::string("<nothing>") : std::string(buf, static_cast<std::size_t>(n));
  }

 private:
  std::string path_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SystemdNotifyTest, SendsReadyWithStatusStoppingWatchdogAndReloading) {
  NotifySocket systemd;
  ASSERT_TRUE(systemd.bound());
  EXPECT_TRUE(NotifyReady("serving 0 clients"));
  EXPECT_EQ(systemd.Receive(), "READY=1\nSTATUS=serving 0 clients");
  EXPECT_TRUE(NotifyReady());
  EXPECT_EQ(systemd.Receive(), "READY=1");
  EXPECT_TRUE(NotifyWatchdog());
  EXPECT_EQ(systemd.Receive(), "WATCHDOG=1");
  EXPECT_TRUE(NotifyReloading());
  EXPECT_EQ(systemd.Receive(), "RELOADING=1");
  EXPECT_TRUE(NotifyStopping());
  EXPECT_EQ(systemd.Receive(), "STOPPING=1");
  EXPECT_TRUE(NotifyStatus("3 clients"));
  EXPECT_EQ(systemd.Receive(), "STATUS=3 clients");
}

TEST(SystemdNotifyTest, OutsideSystemdEveryCallIsAHarmlessNoOp) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(NotifyReady());
  EXPECT_FALSE(NotifyWatchdog());
  EXPECT_FALSE(NotifyStopping());
}

TEST(SystemdNotifyTest, WatchdogPingsAtHalfTheIntervalOnlyForThisPid) {
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  EXPECT_EQ(WatchdogPingIntervalUs(), 0u);
  setenv("WATCHDOG_USEC", "4000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  EXPECT_EQ(WatchdogPingIntervalUs(), 2'000'000u);
  // Inherited by a child: the watchdog belongs to the main process, not to us.
  setenv("WATCHDOG_PID", std::to_string(getpid() + 1).c_str(), 1);
  EXPECT_EQ(WatchdogPingIntervalUs(), 0u);
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  setenv("WATCHDOG_USEC", "garbage", 1);
  EXPECT_EQ(WatchdogPingIntervalUs(), 0u);
}

TEST(SystemdNotifyTest, JournalIsDetectedByStderrDeviceAndInode) {
  struct stat st {};
  ASSERT_EQ(fstat(STDERR_FILENO, &st), 0);
  unsetenv("JOURNAL_STREAM");
  EXPECT_FALSE(StderrIsJournal());
  const std::string mine = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  setenv("JOURNAL_STREAM", mine.c_str(), 1);
  EXPECT_TRUE(StderrIsJournal());
  const std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  setenv("JOURNAL_STREAM", other.c_str(), 1);
  EXPECT_FALSE(StderrIsJournal());
  setenv("JOURNAL_STREAM", (mine + "x").c_str(), 1);
  EXPECT_FALSE(StderrIsJournal());
}

std::string LogThrough(bool journal, spdlog::level::level_enum level, const std::string& text) {
  std::ostringstream out;
  spdlog::logger logger("t", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  logger.set_level(spdlog::level::trace);
  ApplyLogPattern(logger, journal);
  logger.log(level, text);
  return out.str();
}

TEST(SystemdNotifyTest, JournalLinesCarryPriorityAndNoTimestamp) {
  EXPECT_EQ(LogThrough(true, spdlog::level::warn, "disk full"), "<4>disk full\n");
  EXPECT_EQ(LogThrough(true, spdlog::level::err, "x"), "<3>x\n");
  EXPECT_EQ(LogThrough(true, spdlog::level::info, "x"), "<6>x\n");
  EXPECT_EQ(LogThrough(true, spdlog::level::debug, "x"), "<7>x\n");
  EXPECT_EQ(LogThrough(true, spdlog::level::critical, "x"), "<2>x\n");
}

// `shape` with '#' standing for any digit (no <regex>: GCC 12 warns inside it under ASan).
bool MatchesShape(const std::string& text, const std::string& shape) {
  if (text.size() != shape.size()) return false;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const bool ok = shape[i] == '#' ? std::isdigit(static_cast<unsigned char>(text[i])) != 0
                                    : text[i] == shape[i];
    if (!ok) return false;
  }
  return true;
}

TEST(SystemdNotifyTest, TerminalLinesCarryATimestamp) {
  const std::string line = LogThrough(false, spdlog::level::warn, "disk full");
  EXPECT_TRUE(MatchesShape(line, "[####-##-## ##:##:##.###] [warning] disk full\n")) << line;
}

}  // namespace
}  // namespace chameleon::daemon
