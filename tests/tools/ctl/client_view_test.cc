// chameleonctl client ID, text form: the swap table and the policy's predicted vs measured time.
#include "client_view.h"

#include <gtest/gtest.h>

#include <sstream>
#include <string>

namespace chameleon::ctl {
namespace {

using nlohmann::json;

json Client() {
  return json::parse(R"({
    "id": 3, "slot": 0, "stage": "STABLE",
    "swap": {"out_bytes": 4194304, "in_bytes": 2097152, "stalls": 2, "stall_s": 0.25,
             "prefetch_hits": 11, "prefetch_misses": 4, "host_pool_bytes": 8388608,
             "vmm_calls": 901, "fault_ins": 1, "evictions": 5, "policy_ignored": 7,
             "iterations": 12,
             "last_iteration": {"vmm_calls": 37, "out_bytes": 1048576, "in_bytes": 524288}},
    "policy": {"generation": 9, "applied_generation": 9,
               "in_force": {"generation": 9, "swaps": 6, "predicted_iteration_s": 0.02,
                            "measured_iteration_s": 0.025},
               "candidates": [{"generation": 4, "swaps": 6, "predicted_iteration_s": 0.02,
                               "measured_iteration_s": 0.03, "predicted_stall_s": 0.001,
                               "predicted_peak_bytes": 1000}]}
  })");
}

std::string Render(const json& client) {
  std::ostringstream out;
  PrintClient(out, client);
  return out.str();
}

/// The line of `text` that starts (after indentation) with `label`.
std::string Line(const std::string& text, const std::string& label) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto first = line.find_first_not_of(' ');
    if (first != std::string::npos && line.compare(first, label.size(), label) == 0) return line;
  }
  return "";
}

TEST(CtlClientViewTest, ShowsEachExecutorCounterWithItsTotalAndLastIteration) {
  const std::string text = Render(Client());
  EXPECT_NE(Line(text, "swapped out (bytes)").find("4194304"), std::string::npos) << text;
  EXPECT_NE(Line(text, "swapped out (bytes)").find("1048576"), std::string::npos) << text;
  EXPECT_NE(Line(text, "swapped in (bytes)").find("524288"), std::string::npos) << text;
  EXPECT_NE(Line(text, "VMM calls").find("901"), std::string::npos) << text;
  EXPECT_NE(Line(text, "VMM calls").find("37"), std::string::npos) << text;
  EXPECT_NE(Line(text, "stall time (s)").find("0.25"), std::string::npos) << text;
  EXPECT_NE(Line(text, "prefetch misses").find('4'), std::string::npos) << text;
  EXPECT_NE(Line(text, "fault-ins").find('1'), std::string::npos) << text;
  EXPECT_NE(Line(text, "evictions").find('5'), std::string::npos) << text;
  EXPECT_NE(Line(text, "policy entries ignored").find('7'), std::string::npos) << text;
  EXPECT_NE(Line(text, "host pool (bytes)").find("8388608"), std::string::npos) << text;
}

TEST(CtlClientViewTest, ComparesThePredictedAndMeasuredIterationTimeOfThePolicyInForce) {
  const std::string line = Line(Render(Client()), "policy in force");
  EXPECT_NE(line.find("generation 9"), std::string::npos) << line;
  EXPECT_NE(line.find("predicted 0.02 s"), std::string::npos) << line;
  EXPECT_NE(line.find("measured 0.025 s"), std::string::npos) << line;
  EXPECT_NE(line.find("+25.0 %"), std::string::npos) << line;
}

TEST(CtlClientViewTest, ListsCandidatesOnceAndNotTheRawSwapObject) {
  const std::string text = Render(Client());
  EXPECT_NE(text.find("candidates:"), std::string::npos);
  EXPECT_EQ(text.find("last_iteration"), std::string::npos) << text;  // shown as a table instead
  EXPECT_EQ(text.find("in_force"), std::string::npos) << text;
}

TEST(CtlClientViewTest, AnOlderDaemonsDescriptionPrintsDashesInsteadOfFailing) {
  json client = Client();
  client["swap"] = {{"out_bytes", 1}};  // no detail, no last_iteration
  client["policy"]["in_force"] = {{"generation", 0}, {"predicted_iteration_s", nullptr}};
  const std::string text = Render(client);
  EXPECT_NE(Line(text, "VMM calls").find('-'), std::string::npos) << text;
  const std::string line = Line(text, "policy in force");
  EXPECT_NE(line.find("predicted - s"), std::string::npos) << line;
  EXPECT_EQ(line.find('%'), std::string::npos) << line;
}

}  // namespace
}  // namespace chameleon::ctl
