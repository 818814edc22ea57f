// The Kineto join on a synthetic pair: device event -> correlation -> launch -> innermost cpu_op
// -> rf_id (Ev Idx - 1, or "Record function id") -> ET node -> op.
#include "chameleon/trace/kineto.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "chameleon/trace/reader.h"
#include "trace_fixtures.h"

namespace chameleon::trace {
namespace {

using ::testing::HasSubstr;
using testing::json;
using testing::Tensor;

json CpuOp(const char* name, double ts, double dur, int ev_idx) {
  return {{"ph", "X"}, {"cat", "cpu_op"}, {"name", name}, {"pid", 7},
          {"tid", 7},  {"ts", ts},        {"dur", dur},   {"args", {{"Ev Idx", ev_idx}}}};
}
json Launch(double ts, int correlation) {
  return {{"ph", "X"},
          {"cat", "cuda_runtime"},
          {"name", "cudaLaunchKernel"},
          {"pid", 7},
          {"tid", 7},
          {"ts", ts},
          {"dur", 1},
          {"args", {{"correlation", correlation}}}};
}
json Kernel(int correlation, double dur, const char* name = "k") {
  return {{"ph", "X"},    {"cat", "kernel"},
          {"name", name}, {"pid", 0},
          {"tid", 7},     {"ts", 1000},
          {"dur", dur},   {"args", {{"correlation", correlation}, {"stream", 7}}}};
}

class KinetoJoin : public ::testing::Test {
 protected:
  void SetUp() override {
    // ET: linear (rf 10) -> addmm (rf 11); a separate mul (rf 12). rf_id = node id in fixtures.
    trace_ = ParseTrace(testing::Document({
                            {2, 1, "[pytorch|profiler|execution_trace|thread]"},
                            {10, 2, "aten::linear", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}},
                            {11, 10, "aten::addmm", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}},
                            {12, 2, "aten::mul", {Tensor(101, 51, 8)}, {Tensor(102, 52, 8)}},
                        }),
                        "et.json");
    w_ = BuildWorkload(trace_);
    ASSERT_EQ(w_.ops.size(), 2u);
  }
  std::string Write(const json& events) {
    const std::string path = dir_ + "/kineto.json";
    std::ofstream(path) << json{{"traceEvents", events}}.dump();
    return path;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Trace trace_;
  Workload w_;
  std::string dir_ = [] {
    char tmpl[] = "/tmp/kineto_test.XXXXXX";
    return std::string(mkdtemp(tmpl));
  }();
};

TEST_F(KinetoJoin, ShouldSumDeviceEventsOfTheInnermostOpsNode) {
  // The launch at ts 105 is inside both linear (100..200) and addmm (102..150): addmm owns it.
  // linear's own launch (ts 160) goes to its first op below, addmm as well.
  const json events = json::array(
      {CpuOp("aten::linear", 100, 100, 11), CpuOp("aten::addmm", 102, 48, 12),
       CpuOp("aten::mul", 300, 20, 13), Launch(105, 1), Launch(160, 2), Launch(305, 3),
       Kernel(1, 4.5, "sm80_gemm"), Kernel(2, 1.25, "splitk_reduce"), Kernel(3, 7), Kernel(99, 1)});
  const KinetoJoinStats s = JoinKineto(trace_, Write(events), &w_);
  EXPECT_EQ(s.rf_id_name_match, 3u);
  EXPECT_EQ(s.device_events, 4u);
  EXPECT_EQ(s.joined, 3u);
  EXPECT_EQ(s.no_launch, 1u) << "correlation 99 has no launch";
  EXPECT_EQ(w_.ops[0].duration_ns, 5750);
  EXPECT_EQ(w_.ops[0].device_name, "sm80_gemm") << "the longest of its kernels";
  EXPECT_EQ(w_.ops[1].duration_ns, 7000);
}

TEST_F(KinetoJoin, ShouldPreferAnExplicitRecordFunctionId) {
  json op = CpuOp("aten::mul", 300, 20, 999);
  op["args"]["Record function id"] = 12;
  const KinetoJoinStats s =
      JoinKineto(trace_, Write(json::array({op, Launch(305, 3), Kernel(3, 2)})), &w_);
  EXPECT_EQ(s.rf_id_name_match, 1u);
  EXPECT_EQ(w_.ops[1].duration_ns, 2000);
  EXPECT_EQ(w_.ops[0].duration_ns, -1);
}

TEST_F(KinetoJoin, ShouldNameTheBadEventAndField) {
  json bad = Kernel(3, 2);
  bad["args"]["correlation"] = "three";
  try {
    JoinKineto(trace_, Write(json::array({CpuOp("aten::mul", 300, 20, 13), bad})), &w_);
    FAIL() << "accepted";
  } catch (const TraceError& e) {
    EXPECT_THAT(e.what(), HasSubstr("kineto.json: traceEvents[1]: args.correlation"));
  }
  EXPECT_THROW(JoinKineto(trace_, Write(json::object()), &w_), TraceError);
}

}  // namespace
}  // namespace chameleon::trace
