// policy::Profile <-> JSON (docs/profile-format.md) and BuildProfile on a synthetic trace.
#include "chameleon/policy/profile_json.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "chameleon/trace/profile_builder.h"
#include "chameleon/trace/reader.h"
#include "trace_fixtures.h"

namespace chameleon::trace {
namespace {

using testing::FakeNode;
using ::testing::HasSubstr;
using testing::json;
using testing::Tensor;

policy::Profile SyntheticProfile() {
  const Trace t = ParseTrace(
      testing::Document({
          {2, 1, "[pytorch|profiler|execution_trace|thread]"},
          {3, 2, "aten::mul", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}},
          {4, 2, "aten::add", {Tensor(101, 51, 8), Tensor(100, 50, 8)}, {Tensor(102, 52, 16)}},
          {5, 2, "aten::mul", {Tensor(102, 52, 16)}, {Tensor(103, 53, 4)}},
      }),
      "synthetic.json");
  return BuildProfile(t, BuildWorkload(t), 0, 0.25);
}

TEST(ProfileBuilder, ShouldListOpsTensorsUsesAndLiveBytes) {
  const policy::Profile p = SyntheticProfile();
  ASSERT_EQ(p.ops.size(), 3u);
  EXPECT_EQ(p.ops[0].token, p.ops[2].token) << "same name, same token";
  EXPECT_NE(p.ops[0].token, p.ops[1].token);
  EXPECT_EQ(p.ops[1].name, "aten::add");
  EXPECT_DOUBLE_EQ(p.iteration_s, 0.25);
  ASSERT_EQ(p.tensors.size(), 4u);
  // Persistent first: storage 50 (a parameter, live throughout), then 51, 52, 53 by creation.
  EXPECT_EQ(p.tensors[0].external_id, 50u);
  EXPECT_EQ(p.tensors[0].alloc_op, -1);
  EXPECT_EQ(p.tensors[0].uses, (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(p.tensors[2].external_id, 52u);
  EXPECT_EQ(p.tensors[2].alloc_op, 1);
  EXPECT_EQ(p.tensors[2].free_op, 2);
  EXPECT_EQ(p.tensors[2].bytes, 64u);
  // 50 (32 B) is always live; 51 (32) at ops 0-1; 52 (64) at ops 1-2; 53 (16) at op 2.
  EXPECT_EQ(p.ops[0].bytes_live_after, 64u);
  EXPECT_EQ(p.ops[1].bytes_live_after, 128u);
  EXPECT_EQ(p.ops[2].bytes_live_after, 112u);
}

TEST(ProfileJson, ShouldRoundTripEveryField) {
  policy::Profile p = SyntheticProfile();
  p.layers_hint = 12;
  p.ops[1].phase = policy::Phase::kBackward;
  p.tensors[3].swappable = false;
  p.tensors[2].device = 3;
  p.tensors[1].swappable = false;
  p.tensors[1].pinned = true;
  p.ops[2].device_s = 0.125;
  const policy::Profile q = policy::ProfileFromJson(policy::ProfileToJson(p, 2));
  EXPECT_EQ(q.source, p.source);
  EXPECT_EQ(q.layers_hint, 12u);
  EXPECT_DOUBLE_EQ(q.iteration_s, p.iteration_s);
  ASSERT_EQ(q.ops.size(), p.ops.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    EXPECT_EQ(q.ops[i].token, p.ops[i].token);
    EXPECT_EQ(q.ops[i].name, p.ops[i].name);
    EXPECT_EQ(q.ops[i].phase, p.ops[i].phase);
    EXPECT_EQ(q.ops[i].reads, p.ops[i].reads);
    EXPECT_EQ(q.ops[i].writes, p.ops[i].writes);
    EXPECT_EQ(q.ops[i].bytes_live_after, p.ops[i].bytes_live_after);
    EXPECT_DOUBLE_EQ(q.ops[i].device_s, p.ops[i].device_s);
  }
  ASSERT_EQ(q.tensors.size(), p.tensors.size());
  for (std::size_t i = 0; i < p.tensors.size(); ++i) {
    EXPECT_EQ(q.tensors[i].external_id, p.tensors[i].external_id);
    EXPECT_EQ(q.tensors[i].bytes, p.tensors[i].bytes);
    EXPECT_EQ(q.tensors[i].alloc_op, p.tensors[i].alloc_op);
    EXPECT_EQ(q.tensors[i].free_op, p.tensors[i].free_op);
    EXPECT_EQ(q.tensors[i].uses, p.tensors[i].uses);
    EXPECT_EQ(q.tensors[i].swappable, p.tensors[i].swappable);
    EXPECT_EQ(q.tensors[i].device, p.tensors[i].device);
    EXPECT_EQ(q.tensors[i].pinned, p.tensors[i].pinned);
  }
}

std::string ErrorOf(const json& doc) {
  try {
    policy::ProfileFromJson(doc.dump());
  } catch (const policy::ProfileFormatError& e) {
    return e.what();
  }
  return "no error";
}

TEST(ProfileJson, ShouldNameTheOffendingField) {
  const json good = json::parse(policy::ProfileToJson(SyntheticProfile()));
  json doc = good;
  doc["ops"][1]["reads"][0] = 99;
  EXPECT_THAT(ErrorOf(doc),
              HasSubstr("$.ops[1].reads[0]: tensor index 99 out of range (4 tensors)"));
  doc = good;
  doc["tensors"][0]["uses"] = json::array({1, 0});
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.tensors[0].uses[1]: not ascending"));
  doc = good;
  doc["tensors"][2].erase("bytes");
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.tensors[2].bytes: missing"));
  doc = good;
  doc["tensors"][2]["free_op"] = 3;
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.tensors[2].free_op: 3 out of range [-1, 2]"));
  doc = good;
  doc["tensors"][1]["device"] = 65536;
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.tensors[1].device: 65536 out of range [0, 65535]"));
  doc = good;
  doc["tensors"][1]["device"] = "gpu1";
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.tensors[1].device: expected integer"));
  doc["tensors"][1]["device"] = 0;
  doc["tensors"][1]["pinned"] = 1;
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.tensors[1].pinned: expected boolean"));
  doc["tensors"][1].erase("pinned");
  doc = good;
  doc["ops"][2]["device_s"] = -1;
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.ops[2].device_s: expected a finite non-negative number"));
  doc = good;
  doc["ops"][2]["device_s"] = "fast";
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.ops[2].device_s: expected a finite non-negative number"));
  doc = good;
  doc["ops"][0]["phase"] = "sideways";
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.ops[0].phase: unknown phase"));
  doc = good;
  doc["format_version"] = 2;
  EXPECT_THAT(ErrorOf(doc), HasSubstr("unsupported version 2"));
  doc = good;
  doc["format"] = "other";
  EXPECT_THAT(ErrorOf(doc), HasSubstr("$.format"));
  EXPECT_THAT(ErrorOf(json::array()), HasSubstr("expected object"));
  EXPECT_THROW(policy::ProfileFromJson("{\"format\":"), policy::ProfileFormatError);
}

}  // namespace
}  // namespace chameleon::trace
