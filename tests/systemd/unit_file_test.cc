// The systemd unit: `systemd-analyze verify` passes, `systemd-analyze security --offline=yes`
// rates its exposure at most 3.0 (and docs/operations.md records the same number), and the
// hardening leaves the product working: the metrics address stays reachable, the socket stays
// reachable by the intended group, and the daemon can still read client uids.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "chameleon/daemon/config_file.h"
#include "process_util.h"

namespace chameleon::service_test {
namespace {

const std::string kSource = CHAMELEON_SOURCE_DIR;
const std::string kUnit = kSource + "/systemd/chameleond.service";

/// Key -> every value it was given (systemd keys may repeat), across all sections.
std::multimap<std::string, std::string> ParseUnit(const std::string& text) {
  std::multimap<std::string, std::string> keys;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
    const auto eq = line.find('=');
    if (eq != std::string::npos) keys.emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return keys;
}

std::string One(const std::multimap<std::string, std::string>& keys, const std::string& key) {
  auto it = keys.find(key);
  return it == keys.end() ? "" : it->second;
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

/// A copy of the unit whose binaries are the ones just built (verify checks they exist).
std::string UnitWithBuiltBinary(const TempDir& dir) {
  std::string text = ReadFile(kUnit);
  text = std::regex_replace(text, std::regex("/usr/sbin/chameleond"), CHAMELEOND_PATH);
  const std::string path = dir.path() + "/chameleond.service";
  WriteFile(path, text);
  return path;
}

double MeasureExposure(const std::string& unit_path, std::string* report) {
  const Output out =
      RunCommand({"/usr/bin/systemd-analyze", "security", "--offline=yes", "--no-pager", unit_path},
                 Millis(30000));
  *report = out.text;
  std::smatch m;
  if (!std::regex_search(out.text, m, std::regex(R"(Overall exposure level for \S+: ([0-9.]+))"))) {
    return -1;
  }
  return std::stod(m[1]);
}

TEST(UnitFileTest, SystemdAnalyzeVerifyPasses) {
  TempDir dir("chameleon-unit");
  const std::string unit = UnitWithBuiltBinary(dir);
  const Output out =
      RunCommand({"/usr/bin/systemd-analyze", "verify", "--man=no", unit}, Millis(30000));
  EXPECT_EQ(out.exit_code, 0) << out.text;
  // Parse problems are reported as "<file>:<line>: ..."; there must be none.
  EXPECT_EQ(out.text.find("chameleond.service:"), std::string::npos) << out.text;
}

TEST(UnitFileTest, ExposureIsAtMostThreeAndRecordedInTheDocs) {
  TempDir dir("chameleon-unit");
  std::string report;
  const double exposure = MeasureExposure(UnitWithBuiltBinary(dir), &report);
  ASSERT_GE(exposure, 0.0) << report;
  EXPECT_LE(exposure, 3.0) << report;
  char recorded[64];
  std::snprintf(recorded, sizeof(recorded), "exposure level %.1f", exposure);
  const std::string docs = ReadFile(kSource + "/docs/operations.md");
  EXPECT_NE(docs.find(recorded), std::string::npos)
      << "docs/operations.md must record '" << recorded << "'";
}

/// Whether an IPAddressAllow= entry covers an IPv4 address (keywords as systemd.resource-control
/// defines them, or a CIDR prefix).
bool AllowCovers(const std::string& entry, in_addr_t host_order) {
  if (entry == "any") return true;
  if (entry == "localhost") return (host_order >> 24) == 127;
  if (entry == "link-local") return (host_order >> 16) == 0xa9fe;
  const auto slash = entry.find('/');
  in_addr addr{};
  if (inet_pton(AF_INET, entry.substr(0, slash).c_str(), &addr) != 1) return false;
  const int bits = slash == std::string::npos ? 32 : std::stoi(entry.substr(slash + 1));
  const in_addr_t mask = bits == 0 ? 0 : ~in_addr_t(0) << (32 - bits);
  return (ntohl(addr.s_addr) & mask) == (host_order & mask);
}

TEST(UnitFileTest, HardeningKeepsTheConfiguredMetricsAddressReachable) {
  const auto unit = ParseUnit(ReadFile(kUnit));
  const daemon::ConfigResult example =
      daemon::LoadConfigFile(kSource + "/systemd/chameleond.yaml.example");
  ASSERT_TRUE(example.ok()) << example.ErrorText();
  const std::string listen = example.config.daemon.metrics_listen;
  const std::string host = listen.substr(0, listen.rfind(':'));
  in_addr addr{};
  ASSERT_EQ(inet_pton(AF_INET, host.c_str(), &addr), 1) << listen;

  const std::string private_network = One(unit, "PrivateNetwork");
  EXPECT_TRUE(private_network.empty() || private_network == "no");
  const auto families = Words(One(unit, "RestrictAddressFamilies"));
  for (const char* family : {"AF_UNIX", "AF_INET", "AF_INET6"}) {
    EXPECT_NE(std::find(families.begin(), families.end(), family), families.end()) << family;
  }
  // With IPAddressDeny=any, some IPAddressAllow= entry must cover the metrics host, and the
  // private ranges a cluster's Prometheus scrapes from.
  if (Words(One(unit, "IPAddressDeny")) == std::vector<std::string>{"any"}) {
    std::vector<std::string> allow;
    for (auto [it, end] = unit.equal_range("IPAddressAllow"); it != end; ++it) {
      for (const std::string& w : Words(it->second)) allow.push_back(w);
    }
    for (const char* scraper : {host.c_str(), "10.1.2.3", "192.168.7.8", "172.20.0.5"}) {
      in_addr a{};
      ASSERT_EQ(inet_pton(AF_INET, scraper, &a), 1);
      const bool covered = std::any_of(allow.begin(), allow.end(), [&](const std::string& e) {
        return AllowCovers(e, ntohl(a.s_addr));
      });
      EXPECT_TRUE(covered) << scraper << " is not in IPAddressAllow";
    }
  }
}

TEST(UnitFileTest, HardeningKeepsTheSocketReachableByTheIntendedGroup) {
  const auto unit = ParseUnit(ReadFile(kUnit));
  const daemon::ConfigResult example =
      daemon::LoadConfigFile(kSource + "/systemd/chameleond.yaml.example");
  ASSERT_TRUE(example.ok()) << example.ErrorText();
  const daemon::ServiceConfig& config = example.config;
  // The socket sits in the runtime directory the unit creates ...
  EXPECT_EQ(config.daemon.socket_path,
            "/run/" + One(unit, "RuntimeDirectory") + "/chameleond.sock");
  // ... which the group may traverse (x), owned by the group the socket is handed to ...
  const int dir_mode = std::stoi(One(unit, "RuntimeDirectoryMode"), nullptr, 8);
  EXPECT_TRUE(dir_mode & 0010) << "group cannot traverse the runtime directory";
  EXPECT_FALSE(dir_mode & 0001) << "others can traverse the runtime directory";
  EXPECT_EQ(One(unit, "Group"), config.socket_group);
  // ... and the socket itself is read-write for the group only.
  EXPECT_EQ(config.daemon.socket_mode & 0060, 0060u);
  EXPECT_EQ(config.daemon.socket_mode & 0007, 0u);
  // tmpfiles.d creates the same directory with the same owner and mode at boot.
  const std::string tmpfiles = ReadFile(kSource + "/systemd/chameleon.tmpfiles");
  EXPECT_NE(tmpfiles.find("d /run/chameleon 0750 " + One(unit, "User") + " " + config.socket_group),
            std::string::npos)
      << tmpfiles;
  // sysusers.d creates the user the unit runs as.
  EXPECT_NE(ReadFile(kSource + "/systemd/chameleon.sysusers").find("u " + One(unit, "User") + " "),
            std::string::npos);
}

TEST(UnitFileTest, ServiceContractWithTheDaemon) {
  const auto unit = ParseUnit(ReadFile(kUnit));
  EXPECT_EQ(One(unit, "Type"), "notify");  // READY=1 from the daemon
  EXPECT_EQ(One(unit, "NotifyAccess"), "main");
  EXPECT_FALSE(One(unit, "WatchdogSec").empty());  // WATCHDOG=1 from the loop
  EXPECT_EQ(Words(One(unit, "ExecStart")).front(), "/usr/sbin/chameleond");
  EXPECT_NE(One(unit, "ExecReload").find("-HUP"), std::string::npos);
  // PrivateUsers= would turn every client's SO_PEERCRED uid into "nobody" and break the
  // per-client permission checks of chameleonctl.
  const std::string private_users = One(unit, "PrivateUsers");
  EXPECT_TRUE(private_users.empty() || private_users == "no");
  EXPECT_EQ(One(unit, "NoNewPrivileges"), "yes");
  EXPECT_EQ(One(unit, "ProtectSystem"), "strict");
  EXPECT_EQ(One(unit, "PrivateDevices"), "yes");
}

}  // namespace
}  // namespace chameleon::service_test
