#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "chameleon/ipc/policy_blob.h"
#include "chameleon/policy/anchors.h"
#include "chameleon/policy/explain.h"
#include "chameleon/policy/generator.h"
#include "chameleon/policy/policy_files.h"
#include "chameleon/policy/synthetic.h"

namespace chameleon::policy {
namespace {

struct Fixture {
  Profile profile;
  GenerateResult result;
};

Fixture Planned() {
  SyntheticSpec spec;
  spec.layers = 6;
  spec.ops = 900;
  spec.tensors = 500;
  Fixture f;
  f.profile = MakeTransformerProfile(spec);
  std::uint64_t peak = 0;
  for (const ProfileOp& op : f.profile.ops) peak = std::max(peak, op.bytes_live_after);
  GeneratorOptions o;
  o.device_limit_bytes = peak * 3 / 4;
  f.result = GeneratePlan(f.profile, o);
  return f;
}

TEST(PolicyExplain, ShouldWriteOneCsvRowPerSwapWithAnchors) {
  const Fixture f = Planned();
  ASSERT_TRUE(f.result.ok()) << f.result.message;
  ASSERT_FALSE(f.result.plan.swaps.empty());
  std::ostringstream csv;
  WritePlanCsv(f.result.plan, f.profile, csv);
  std::istringstream lines(csv.str());
  std::string header, row;
  std::getline(lines, header);
  EXPECT_EQ(header.rfind("tensor,external_id,bytes,out_op,out_token", 0), 0u);
  std::size_t rows = 0;
  while (std::getline(lines, row)) {
    ++rows;
    EXPECT_EQ(std::count(row.begin(), row.end(), ','), 16) << row;
  }
  EXPECT_EQ(rows, f.result.plan.swaps.size());
  std::ostringstream table;
  WritePlanTable(f.result.plan, f.profile, table);
  EXPECT_NE(table.str().find("limit"), std::string::npos);
  EXPECT_NE(table.str().find("host"), std::string::npos);
}

TEST(PolicyExplain, ShouldDrawBeforeAfterAndLimitInTheSvg) {
  const Fixture f = Planned();
  std::ostringstream svg;
  WriteMemoryTimelineSvg(f.result.plan, svg);
  const std::string s = svg.str();
  EXPECT_EQ(s.rfind("<svg", 0), 0u);
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n') > 3, true);
  std::size_t polylines = 0;
  for (std::size_t at = s.find("<polyline"); at != std::string::npos;
       at = s.find("<polyline", at + 1)) {
    ++polylines;
  }
  EXPECT_EQ(polylines, 2u);
  EXPECT_NE(s.find("stroke=\"red\""), std::string::npos);
  EXPECT_NE(s.find("</svg>"), std::string::npos);
}

TEST(PolicyExplain, ShouldWriteTimelineFilesAndReportUnwritablePaths) {
  const Fixture f = Planned();
  const auto dir =
      std::filesystem::temp_directory_path() / ("policy_explain_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string error;
  ASSERT_TRUE(WriteMemoryTimelineFile(f.result.plan, (dir / "t.svg").string(), &error)) << error;
  ASSERT_TRUE(WriteMemoryTimelineFile(f.result.plan, (dir / "t.gp").string(), &error)) << error;
  std::ifstream gp(dir / "t.gp");
  std::stringstream script;
  script << gp.rdbuf();
  EXPECT_NE(script.str().find("set output '" + (dir / "t.gp.png").string() + "'"),
            std::string::npos);
  EXPECT_NE(script.str().find("EOD"), std::string::npos);
  EXPECT_TRUE(std::filesystem::file_size(dir / "t.svg") > 100);
  EXPECT_FALSE(WriteMemoryTimelineFile(f.result.plan, (dir / "no/such/dir.svg").string(), &error));
  EXPECT_NE(error.find("cannot open"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(PolicyExplain, ShouldRoundTripThePolicyThroughTheIpcBlobWithResolvableAnchors) {
  const Fixture f = Planned();
  ASSERT_TRUE(f.result.ok());
  const ipc::Policy policy = ToIpcPolicy(f.result.plan, f.profile);
  ASSERT_EQ(policy.entries.size(), f.result.plan.swaps.size());
  for (std::size_t i = 1; i < policy.entries.size(); ++i) {
    const auto prev = ResolveAnchor(
        f.profile, {policy.entries[i - 1].use_token, policy.entries[i - 1].use_occurrence});
    const auto cur =
        ResolveAnchor(f.profile, {policy.entries[i].use_token, policy.entries[i].use_occurrence});
    EXPECT_LE(prev, cur);  // entries in the order of their uses: the in-stream's order
  }
  for (const ipc::SwapEntry& e : policy.entries) {
    const auto out = ResolveAnchor(f.profile, {e.out_token, e.out_occurrence});
    const auto in = ResolveAnchor(f.profile, {e.in_token, e.in_occurrence});
    const auto use = ResolveAnchor(f.profile, {e.use_token, e.use_occurrence});
    ASSERT_GE(out, 0);
    EXPECT_LT(out, in);
    EXPECT_LE(in, use);
  }
  std::vector<std::uint8_t> blob;
  ipc::EncodePolicy(policy, &blob);
  ipc::Policy decoded;
  ASSERT_EQ(ipc::DecodePolicy(blob, &decoded), ipc::BlobError::kOk);
  ASSERT_EQ(decoded.entries.size(), policy.entries.size());
  EXPECT_EQ(std::memcmp(decoded.entries.data(), policy.entries.data(),
                        policy.entries.size() * sizeof(ipc::SwapEntry)),
            0);
  EXPECT_EQ(decoded.summary.predicted_peak_bytes, f.result.plan.predicted_peak_bytes);
  EXPECT_DOUBLE_EQ(decoded.summary.predicted_stall_s, f.result.plan.predicted_stall_s);
}

}  // namespace
}  // namespace chameleon::policy
