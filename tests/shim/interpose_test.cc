// The shim as a guest: interception matrix, dlsym behaviour, exported symbols, dependencies,
// pass-through without a daemon and with CHAMELEON_DISABLE=1.
#include <cuda.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "child_process.h"
#include "fake_daemon.h"
#include "test_env.h"

namespace shim_test {
namespace {

std::vector<std::string> Shell(const std::string& command) {
  std::vector<std::string> lines;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return lines;
  char buf[1024];
  while (std::fgets(buf, sizeof(buf), pipe) != nullptr) {
    std::string line(buf);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    lines.push_back(line);
  }
  ::pclose(pipe);
  return lines;
}

std::set<std::string> TrackedNames() {
  return {
#define CHAMELEON_SYMBOL(name, base, version, pt) #name,
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
  };
}

TEST(ShimInterposeTest, InterceptionMatrixCountsMatchSimgpu) {
  std::vector<std::string> out;
  auto env = ShimEnv(SocketPath("matrix"));  // no daemon: interposition works without one
  const int rc = RunToCompletion({CHAMELEON_MATRIX_PROG}, env, &out, 60000);
  std::string failures;
  int counted = 0;
  for (const std::string& line : out) {
    if (line.rfind("FAIL", 0) == 0) failures += line + "\n";
    if (line.rfind("count ", 0) == 0) ++counted;
  }
  EXPECT_EQ(rc, 0) << failures;
  EXPECT_EQ(failures, "");
  EXPECT_EQ(counted, static_cast<int>(TrackedNames().size()));
  EXPECT_FALSE(out.empty() || out.back().rfind("PASS", 0) != 0) << (out.empty() ? "" : out.back());
}

TEST(ShimInterposeTest, ExportsOnlyDriverNamesDlsymAndChameleonPrefix) {
  const auto lines = Shell(std::string("nm -D --defined-only ") + CHAMELEON_SHIM_PATH);
  ASSERT_FALSE(lines.empty());
  std::set<std::string> cu_names;
  for (const std::string& line : lines) {
    const std::string name = line.substr(line.rfind(' ') + 1);
    const bool allowed =
        name.rfind("cu", 0) == 0 || name == "dlsym" || name.rfind("chameleon_", 0) == 0;
    EXPECT_TRUE(allowed) << "unexpected export: " << name;
    if (name.rfind("cu", 0) == 0) cu_names.insert(name);
  }
  EXPECT_EQ(cu_names, TrackedNames());
  // dlsym must be unversioned so that it satisfies dlsym@GLIBC_2.34 and @GLIBC_2.2.5 references.
  const auto dlsym_lines = Shell(std::string("nm -D --defined-only --with-symbol-versions ") +
                                 CHAMELEON_SHIM_PATH + " | grep ' dlsym'");
  ASSERT_EQ(dlsym_lines.size(), 1u);
  EXPECT_EQ(dlsym_lines[0].find('@'), std::string::npos) << dlsym_lines[0];
}

TEST(ShimInterposeTest, DependsOnlyOnLibcLevelLibraries) {
  const auto lines = Shell(std::string("ldd ") + CHAMELEON_SHIM_PATH);
  ASSERT_FALSE(lines.empty());
  const std::vector<std::string> allowed = {"linux-vdso", "libc.so",       "ld-linux", "libm.so",
                                            "libdl.so",   "libpthread.so", "librt.so"};
  for (const std::string& line : lines) {
    const bool ok = std::any_of(allowed.begin(), allowed.end(), [&](const std::string& a) {
      return line.find(a) != std::string::npos;
    });
    EXPECT_TRUE(ok) << "unexpected dependency: " << line;
  }
}

TEST(ShimInterposeTest, DlsymHookIsRecursionSafeAndKeepsRtldNext) {
  std::vector<std::string> out;
  auto env = ShimEnv(SocketPath("dlsym"));
  const int rc = RunToCompletion({CHAMELEON_WORKLOAD_PROG, "dlsym"}, env, &out, 30000);
  EXPECT_EQ(rc, 0);
  EXPECT_NE(std::find(out.begin(), out.end(), "dlsym ok"), out.end());
  for (const std::string& line : out) EXPECT_EQ(line.rfind("FAIL", 0), std::string::npos) << line;
}

TEST(ShimInterposeTest, DriverReenteringTheShimDuringInitGetsAnErrorNotADeadlock) {
  std::vector<std::string> out;
  auto env = ShimEnv(SocketPath("reentrant"));
  env["CHAMELEON_REAL_LIBCUDA"] = CHAMELEON_REENTRANT_DRIVER;
  const int rc = RunToCompletion({CHAMELEON_WORKLOAD_PROG, "dlsym"}, env, &out, 30000);
  EXPECT_EQ(rc, 0);
  // The constructor ran inside the shim's initialisation and was told "not initialised".
  EXPECT_NE(std::find(out.begin(), out.end(),
                      "reentrant rc " + std::to_string(CUDA_ERROR_NOT_INITIALIZED)),
            out.end());
  EXPECT_NE(std::find(out.begin(), out.end(), "dlsym ok"), out.end());
}

TEST(ShimInterposeTest, WithoutDaemonOutputIsIdenticalToNoShim) {
  std::vector<std::string> plain;
  std::vector<std::string> shim;
  ASSERT_EQ(RunToCompletion({CHAMELEON_WORKLOAD_PROG, "checksum", "4"}, PlainEnv(), &plain, 30000),
            0);
  ASSERT_EQ(RunToCompletion({CHAMELEON_WORKLOAD_PROG, "checksum", "4"},
                            ShimEnv("/nonexistent/chameleon.sock"), &shim, 30000),
            0);
  EXPECT_EQ(plain, shim);
  ASSERT_FALSE(plain.empty());
  EXPECT_EQ(plain.back(), "done");
}

TEST(ShimInterposeTest, DisabledShimNeverConnectsAndChangesNothing) {
  chameleon::shim::testing::FakeDaemon daemon;
  const std::string socket = SocketPath("disabled");
  ASSERT_TRUE(daemon.Start(socket));
  auto env = ShimEnv(socket);
  env["CHAMELEON_DISABLE"] = "1";
  std::vector<std::string> plain;
  std::vector<std::string> shim;
  ASSERT_EQ(RunToCompletion({CHAMELEON_WORKLOAD_PROG, "checksum", "3"}, PlainEnv(), &plain, 30000),
            0);
  ASSERT_EQ(RunToCompletion({CHAMELEON_WORKLOAD_PROG, "checksum", "3"}, env, &shim, 30000), 0);
  EXPECT_EQ(plain, shim);
  EXPECT_EQ(daemon.client_count(), 0u);
}

}  // namespace
}  // namespace shim_test
