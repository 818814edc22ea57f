// chameleon_host_memory_bytes{numa=...}: the node's host memory per NUMA node as the daemon
// exposes it, read back from the exposition /metrics serves.
#include <gtest/gtest.h>

#include <map>
#include <sstream>

#include "chameleon/daemon/metrics.h"

namespace chameleon::daemon {
namespace {

// Value of every chameleon_host_memory_bytes series, by its numa label.
std::map<std::string, double> HostMemorySeries(const std::string& text) {
  std::map<std::string, double> out;
  const std::string prefix = "chameleon_host_memory_bytes{numa=\"";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::size_t quote = line.find('"', prefix.size());
    const std::size_t space = line.rfind(' ');
    out[line.substr(prefix.size(), quote - prefix.size())] = std::stod(line.substr(space + 1));
  }
  return out;
}

TEST(HostMemoryMetricsTest, ShouldExposeOneSeriesPerNumaNode) {
  Metrics metrics;
  metrics.SetHostMemory({1ull << 40, 1ull << 39});
  const auto series = HostMemorySeries(metrics.Serialize());
  ASSERT_EQ(series.size(), 2u);
  EXPECT_DOUBLE_EQ(series.at("0"), 1099511627776.0);
  EXPECT_DOUBLE_EQ(series.at("1"), 549755813888.0);
}

TEST(HostMemoryMetricsTest, ShouldZeroNodesAShorterListNoLongerHas) {
  Metrics metrics;
  metrics.SetHostMemory({4096, 8192});
  metrics.SetHostMemory({2048});
  const auto series = HostMemorySeries(metrics.Serialize());
  EXPECT_DOUBLE_EQ(series.at("0"), 2048.0);
  EXPECT_DOUBLE_EQ(series.at("1"), 0.0);
}

}  // namespace
}  // namespace chameleon::daemon
