// chameleon-plan as a subprocess: with --json stdout is one JSON document with the documented
// top-level fields; a model that does not fit is an answer (exit 0, fits: false).
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct PlanRun {
  int status;
  std::string out;
};

PlanRun RunPlan(const std::string& args) {
  const std::string cmd = std::string(PLAN_BINARY) + " " + args + " 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), out};
}

TEST(PlanCliTest, ShouldPrintOnlyJsonWithTheTopLevelFields) {
  const PlanRun r =
      RunPlan("--model llama3-70b --topology wafer:config3 --seed 2 --generations 5 --json");
  ASSERT_EQ(r.status, 0);
  const auto j = nlohmann::json::parse(r.out);  // throws if anything but JSON is on stdout
  for (const char* key : {"t_max", "global_cost", "fits", "stages", "links", "dies",
                          "dram_utilisation", "peak_link_utilisation", "baseline",
                          "gain_over_baseline", "throughput_tokens_per_s", "shortfall_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["stages"].size(), j["pipeline"]["stages"].get<std::size_t>());
  EXPECT_EQ(j["dies"].size(), 56u);
}

TEST(PlanCliTest, ShouldAnswerAModelThatDoesNotFitWithExitZero) {
  const PlanRun r = RunPlan("--model gpt-175b --topology wafer:config1 --generations 2 --json");
  ASSERT_EQ(r.status, 0);
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_FALSE(j["fits"].get<bool>());
  EXPECT_GT(j["shortfall_bytes"].get<double>(), 0);
}

TEST(PlanCliTest, ShouldWriteOneSquarePerDieAndOneBarPerLinkToTheSvg) {
  const std::string path = ::testing::TempDir() + "/plan_heat.svg";
  ASSERT_EQ(RunPlan("--model llama2-30b --generations 2 --json --svg " + path).status, 0);
  FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  std::string svg;
  char buf[4096];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) svg.append(buf, n);
  std::fclose(f);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  std::size_t rects = 0;
  for (std::size_t at = svg.find("<rect"); at != std::string::npos;
       at = svg.find("<rect", at + 1)) {
    ++rects;
  }
  EXPECT_EQ(rects, 56u + 97u);  // 7 × 8 dies; 6 × 8 + 7 × 7 = 97 neighbour pairs
}

TEST(PlanCliTest, ShouldRejectAnUnknownTopologyWithExitOne) {
  EXPECT_EQ(RunPlan("--model gpt-175b --topology wafer:config2").status, 1);
}

}  // namespace
