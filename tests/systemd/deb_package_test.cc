// The Debian package: CPack builds the .deb from this build tree, `dpkg-deb -x` installs it into
// a scratch root, and the layout, maintainer scripts and dependencies are checked. Depends must
// name the Debian package of every shared library chameleond actually links (ldd + dpkg -S), so
// the package installs on a clean node.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "process_util.h"

namespace chameleon::service_test {
namespace {

namespace fs = std::filesystem;

bool IsExecutableFile(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111) != 0;
}

/// The .deb CPack made from this build tree, unpacked with dpkg-deb -x (root) and -e (control).
struct Package {
  std::string deb;
  std::string root;
  std::string control;
  std::string Field(const std::string& name) const {
    std::string value = RunCommand({"/usr/bin/dpkg-deb", "-f", deb, name}, Millis(20000)).text;
    while (!value.empty() && value.back() == '\n') value.pop_back();
    return value;
  }
};

void CheckInstallsTheDocumentedLayout(const Package& p) {
  const std::string& r = p.root;
  EXPECT_TRUE(IsExecutableFile(r + "/usr/sbin/chameleond"));
  if (CHAMELEON_HAS_CTL) {
    EXPECT_TRUE(IsExecutableFile(r + "/usr/bin/chameleonctl"));
  }
  if (CHAMELEON_HAS_SHIM) {
    EXPECT_TRUE(fs::is_regular_file(r + "/usr/lib/chameleon/libchameleon.so"));
  }
  EXPECT_EQ(ReadFile(r + "/usr/lib/systemd/system/chameleond.service"),
            ReadFile(CHAMELEON_SOURCE_DIR "/systemd/chameleond.service"));
  EXPECT_EQ(ReadFile(r + "/usr/lib/sysusers.d/chameleon.conf"),
            ReadFile(CHAMELEON_SOURCE_DIR "/systemd/chameleon.sysusers"));
  EXPECT_EQ(ReadFile(r + "/usr/lib/tmpfiles.d/chameleon.conf"),
            ReadFile(CHAMELEON_SOURCE_DIR "/systemd/chameleon.tmpfiles"));
  EXPECT_TRUE(fs::is_regular_file(r + "/usr/share/chameleon/chameleond.yaml.example"));
  EXPECT_TRUE(fs::is_regular_file(r + "/usr/share/doc/chameleon/operations.md"));
  EXPECT_TRUE(fs::is_regular_file(r + "/usr/share/doc/chameleon/deploy/grafana-dashboard.json"));
}

void CheckShipsNoTestTooling(const Package& p) {
  // simgpu's libcuda.so.1 on a GPU node would shadow the real driver.
  for (const auto& entry : fs::recursive_directory_iterator(p.root)) {
    const std::string name = entry.path().filename();
    EXPECT_EQ(name.find("libcuda"), std::string::npos) << entry.path();
    EXPECT_EQ(name.find("train-sim"), std::string::npos) << entry.path();
    EXPECT_EQ(name.find("_test"), std::string::npos) << entry.path();
  }
}

void CheckMaintainerScriptsCreateUserDirectoryAndConfig(const Package& p) {
  const std::string& control = p.control;
  for (const char* script : {"postinst", "prerm", "postrm"}) {
    EXPECT_TRUE(IsExecutableFile(control + "/" + script)) << script;
  }
  const std::string postinst = ReadFile(control + "/postinst");
  EXPECT_NE(postinst.find("systemd-sysusers chameleon.conf"), std::string::npos);
  EXPECT_NE(postinst.find("systemd-tmpfiles --create chameleon.conf"), std::string::npos);
  EXPECT_NE(
      postinst.find("/usr/share/chameleon/chameleond.yaml.example /etc/chameleon/chameleond.yaml"),
      std::string::npos);
  EXPECT_EQ(RunCommand({"/bin/sh", "-n", control + "/postinst"}, Millis(5000)).exit_code, 0);
}

/// The Debian package owning `path` (dpkg -S; merged-/usr systems may know only one spelling).
std::string OwningPackage(const std::string& path) {
  Output owner = RunCommand({"/usr/bin/dpkg", "-S", path}, Millis(20000));
  if (owner.exit_code != 0 && path.rfind("/lib/", 0) == 0) {
    owner = RunCommand({"/usr/bin/dpkg", "-S", "/usr" + path}, Millis(20000));
  }
  return owner.exit_code == 0 ? owner.text.substr(0, owner.text.find(':')) : "";
}

/// `package` and the virtual names it provides (libspdlog1.10 provides libspdlog1.10-fmt9,
/// which is what its shlibs file asks dependants to depend on).
std::vector<std::string> NamesSatisfiedBy(const std::string& package) {
  std::vector<std::string> names = {package};
  const Output provides =
      RunCommand({"/usr/bin/dpkg-query", "-W", "-f=${Provides}", package}, Millis(20000));
  const std::regex name(R"(([a-z0-9][a-z0-9.+-]+))");
  std::istringstream list(provides.text);
  for (std::string item; std::getline(list, item, ',');) {
    std::smatch m;
    if (std::regex_search(item, m, name)) names.push_back(m[1]);
  }
  return names;
}

bool DependsNames(const std::string& depends, const std::string& package) {
  const std::string escaped = std::regex_replace(package, std::regex(R"([.+])"), R"(\$&)");
  return std::regex_search(depends, std::regex("(^|[ ,|])" + escaped + "( |,|$)"));
}

void CheckDependsOnThePackageOfEveryLinkedLibrary(const Package& p) {
  const std::string depends = p.Field("Depends");
  ASSERT_FALSE(depends.empty());
  const std::string binary = p.root + "/usr/sbin/chameleond";
  // The libraries chameleond links directly (DT_NEEDED); transitive ones are their packages'
  // own dependencies. ldd resolves each name to the file that dpkg knows.
  const Output needed = RunCommand({"/usr/bin/readelf", "-d", binary}, Millis(20000));
  const Output ldd = RunCommand({"/usr/bin/ldd", binary}, Millis(20000));
  ASSERT_EQ(ldd.exit_code, 0) << ldd.text;
  std::map<std::string, std::string> resolved;
  std::smatch m;
  std::istringstream ldd_lines(ldd.text);
  for (std::string line; std::getline(ldd_lines, line);) {
    if (std::regex_search(line, m, std::regex(R"((\S+) => (/\S+))"))) resolved[m[1]] = m[2];
  }
  int checked = 0;
  std::istringstream lines(needed.text);
  for (std::string line; std::getline(lines, line);) {
    if (!std::regex_search(line, m, std::regex(R"(\(NEEDED\).*\[(\S+)\])"))) continue;
    ASSERT_EQ(resolved.count(m[1]), 1u) << m[1] << " not resolved by ldd";
    const std::string package = OwningPackage(resolved[m[1]]);
    ASSERT_FALSE(package.empty()) << resolved[m[1]] << " belongs to no package";
    const auto names = NamesSatisfiedBy(package);
    const bool named = std::any_of(names.begin(), names.end(),
                                   [&](const std::string& n) { return DependsNames(depends, n); });
    EXPECT_TRUE(named) << m[1] << " (" << package << ") missing from Depends: " << depends;
    ++checked;
  }
  EXPECT_GE(checked, 5) << needed.text;  // libuv, prometheus-cpp, spdlog, fmt, libc at least
}

void CheckPackagedDaemonRuns(const Package& p) {
  const Output help = RunCommand({p.root + "/usr/sbin/chameleond", "--help"}, Millis(20000));
  EXPECT_EQ(help.exit_code, 0) << help.text;
  EXPECT_NE(help.text.find("--socket"), std::string::npos) << help.text;
}

// One cpack run for every check (each gtest TEST is its own process, and cpack takes seconds).
TEST(DebPackageTest, BuildsAPackageThatInstallsIntoAScratchRoot) {
  TempDir dir("chameleon-deb");
  const Output cpack = RunCommand({CMAKE_CPACK_COMMAND, "-G", "DEB", "--config",
                                   CHAMELEON_BINARY_DIR "/CPackConfig.cmake", "-B", dir.path()},
                                  Millis(90000));
  ASSERT_EQ(cpack.exit_code, 0) << cpack.text;
  Package p;
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    if (entry.path().extension() == ".deb") p.deb = entry.path();
  }
  ASSERT_FALSE(p.deb.empty()) << "cpack made no .deb:\n" << cpack.text;
  p.root = dir.path() + "/root";
  p.control = dir.path() + "/control";
  ASSERT_EQ(RunCommand({"/usr/bin/dpkg-deb", "-x", p.deb, p.root}, Millis(60000)).exit_code, 0);
  ASSERT_EQ(RunCommand({"/usr/bin/dpkg-deb", "-e", p.deb, p.control}, Millis(60000)).exit_code, 0);
  {
    SCOPED_TRACE("layout");
    CheckInstallsTheDocumentedLayout(p);
  }
  {
    SCOPED_TRACE("no test tooling");
    CheckShipsNoTestTooling(p);
  }
  {
    SCOPED_TRACE("maintainer scripts");
    CheckMaintainerScriptsCreateUserDirectoryAndConfig(p);
  }
  {
    SCOPED_TRACE("Depends");
    CheckDependsOnThePackageOfEveryLinkedLibrary(p);
  }
  {
    SCOPED_TRACE("packaged daemon runs");
    CheckPackagedDaemonRuns(p);
  }
}

}  // namespace
}  // namespace chameleon::service_test
