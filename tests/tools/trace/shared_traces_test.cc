// The reader on the real traces in ../shared/traces, cross-checked against independent scans of
// the same JSON (plain nlohmann, no chameleon code).
#include <gtest/gtest.h>
#include <zlib.h>

#include <map>
#include <nlohmann/json.hpp>

#include "chameleon/policy/profile_json.h"
#include "chameleon/trace/kineto.h"
#include "chameleon/trace/profile_builder.h"
#include "chameleon/trace/reader.h"

namespace chameleon::trace {
namespace {

using nlohmann::json;

const std::string kTraces = std::string(CHAMELEON_TRACES_DIR) + "/";
const std::string kResnet = kTraces + "resnet_1gpu_et.json.gz";
const std::string kMegatron = kTraces + "megatron_et_0.json.gz";
const std::string kMegatronKineto = kTraces + "megatron_kineto_0.json.gz";

json LoadJson(const std::string& path) { return json::parse(ReadMaybeGzip(path)); }

// Independent scan: per ProfilerStep id range, how often each op name occurs.
std::vector<std::map<std::string, int>> NamesPerStep(const json& doc) {
  std::vector<std::int64_t> starts;
  for (const json& n : doc["nodes"]) {
    if (n["name"].get<std::string>().rfind("ProfilerStep#", 0) == 0)
      starts.push_back(n["id"].get<std::int64_t>());
  }
  std::sort(starts.begin(), starts.end());
  std::vector<std::map<std::string, int>> counts(starts.size());
  for (const json& n : doc["nodes"]) {
    const auto id = n["id"].get<std::int64_t>();
    auto it = std::upper_bound(starts.begin(), starts.end(), id);
    if (it == starts.begin()) continue;
    ++counts[it - starts.begin() - 1][n["name"].get<std::string>()];
  }
  return counts;
}

TEST(SharedTraces, ResnetShouldHaveThreeProfilerStepsWithTheOpsTheJsonHolds) {
  const Trace t = ReadTrace(kResnet);
  const Workload w = BuildWorkload(t);
  const auto scan = NamesPerStep(LoadJson(kResnet));
  ASSERT_EQ(w.steps.size(), 3u);
  ASSERT_EQ(scan.size(), 3u);
  EXPECT_EQ(w.steps[0].name, "ProfilerStep#4");
  EXPECT_EQ(w.steps[2].name, "ProfilerStep#6");
  for (std::size_t s = 0; s < 3; ++s) {
    std::map<std::string, int> ops;
    for (std::uint32_t k = w.steps[s].first_op; k < w.steps[s].end_op; ++k)
      ++ops[t.nodes[w.ops[k].node].name];
    // Ops that always launch exactly once per occurrence: the workload must hold every one of
    // them, in the right step, and no parent of theirs (aten::conv2d, ConvolutionBackward0).
    for (const char* name :
         {"aten::cudnn_convolution", "aten::convolution_backward", "aten::cudnn_batch_norm",
          "aten::cudnn_batch_norm_backward", "aten::threshold_backward", "aten::clamp_min_",
          "torch::autograd::AccumulateGrad", "nccl:all_reduce", "nccl:broadcast", "aten::addmm",
          "aten::max_pool2d_with_indices", "aten::_foreach_mul_"}) {
      EXPECT_EQ(ops[name], scan[s].at(name)) << name << " in step " << s;
    }
    for (const char* parent :
         {"aten::conv2d", "aten::convolution", "aten::linear", "aten::relu_",
          "ConvolutionBackward0", "aten::batch_norm", "c10d::allreduce_", "aten::view"}) {
      EXPECT_EQ(ops.count(parent), 0u) << parent;
    }
    EXPECT_EQ(ops["aten::cudnn_convolution"], 53) << "ResNet-50 has 53 convolutions";
    EXPECT_EQ(ops["torch::autograd::AccumulateGrad"], 161) << "and 161 parameter tensors";
    EXPECT_EQ(w.steps[s].end_op - w.steps[s].first_op, 1088u)
        << "found by this reader; steps are alike";
  }
}

TEST(SharedTraces, ResnetStorageReuseShouldSplitLifetimes) {
  const Trace t = ReadTrace(kResnet);
  const Workload w = BuildWorkload(t);
  std::map<std::uint64_t, int> lifetimes;
  for (const auto& s : w.storages) ++lifetimes[s.storage_id];
  EXPECT_GT(w.storages.size(), 2 * lifetimes.size()) << "most storage ids carry several lifetimes";
  // Without the split, every reused id would stay live from its first to its last use.
  std::uint64_t merged = 0;
  std::map<std::uint64_t, std::uint64_t> biggest;
  for (const auto& s : w.storages) biggest[s.storage_id] = std::max(biggest[s.storage_id], s.bytes);
  for (auto& [id, bytes] : biggest) merged += bytes;
  EXPECT_LT(PeakBytes(w), merged);
}

TEST(SharedTraces, MegatronShouldBeOneForwardIterationWithCollectives) {
  const Trace t = ReadTrace(kMegatron);
  const Workload w = BuildWorkload(t);
  ASSERT_EQ(w.steps.size(), 1u);
  std::size_t collectives = 0;
  for (const auto& op : w.ops) {
    EXPECT_EQ(op.phase, policy::Phase::kForward);
    collectives += op.kind == OpKind::kCollective;
  }
  EXPECT_EQ(collectives, 85u) << "every nccl:all_reduce of the trace";
}

// The claim of the shared README: in the Megatron pair, ET rf_id == Kineto "Ev Idx" - 1.
TEST(SharedTraces, MegatronRfIdShouldEqualKinetoEvIdxMinusOne) {
  const json et = LoadJson(kMegatron);
  const json kineto = LoadJson(kMegatronKineto);
  std::map<std::int64_t, std::string> by_ev_idx;
  for (const json& e : kineto["traceEvents"]) {
    if (e.value("cat", "") == "cpu_op")
      by_ev_idx[e["args"]["Ev Idx"].get<std::int64_t>()] = e["name"];
  }
  int same = 0, shifted_by_0 = 0;
  for (const json& n : et["nodes"]) {
    const auto rf = n["rf_id"].get<std::int64_t>();
    auto it = by_ev_idx.find(rf + 1);
    same += it != by_ev_idx.end() && it->second == n["name"];
    auto it0 = by_ev_idx.find(rf);
    shifted_by_0 += it0 != by_ev_idx.end() && it0->second == n["name"];
  }
  EXPECT_EQ(same, static_cast<int>(by_ev_idx.size())) << "every cpu_op matches its ET node by name";
  EXPECT_LT(shifted_by_0, same / 10) << "and the offset is really one";

  const Trace t = ReadTrace(kMegatron);
  Workload w = BuildWorkload(t);
  const KinetoJoinStats stats = JoinKineto(t, kMegatronKineto, &w);
  EXPECT_EQ(stats.rf_id_name_match, by_ev_idx.size());
  EXPECT_EQ(stats.rf_id_name_mismatch, 0u);
}

TEST(SharedTraces, MegatronShouldTakeKernelDurationsFromKineto) {
  const json kineto = LoadJson(kMegatronKineto);
  double device_us = 0;
  int kernels = 0;
  for (const json& e : kineto["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset")
      device_us += e["dur"].get<double>();
    kernels += cat == "kernel";
  }
  const Trace t = ReadTrace(kMegatron);
  Workload w = BuildWorkload(t);
  const KinetoJoinStats stats = JoinKineto(t, kMegatronKineto, &w);
  EXPECT_EQ(stats.kernels, static_cast<std::size_t>(kernels));
  EXPECT_EQ(stats.joined, stats.device_events) << "every device event finds its op";
  double joined_us = 0;
  for (const auto& op : w.ops) joined_us += op.duration_ns >= 0 ? op.duration_ns * 1e-3 : 0;
  EXPECT_NEAR(joined_us, device_us, 1.0);
  EXPECT_GE(stats.ops_with_duration + 1, w.ops.size())
      << "at most one op (an unlaunched all_reduce) lacks one";
  EXPECT_NEAR(StepSeconds(w, 0), device_us * 1e-6, 1e-4)
      << "iteration time is the recorded device time";
}

TEST(SharedTraces, ProfileOfResnetShouldBeConsistentAndRoundTrip) {
  const policy::Profile p = ProfileFromTraceFile(kResnet);
  ASSERT_EQ(p.ops.size(), 1088u);
  std::vector<std::int64_t> live(p.ops.size(), 0);
  for (const auto& t : p.tensors) {
    ASSERT_FALSE(t.uses.empty());
    if (t.alloc_op >= 0) {
      EXPECT_LE(t.alloc_op, static_cast<std::int32_t>(t.uses.front()));
      EXPECT_EQ(t.free_op, static_cast<std::int32_t>(t.uses.back()));
    }
    const std::size_t from = t.alloc_op < 0 ? 0 : t.alloc_op;
    const std::size_t to = t.free_op < 0 ? p.ops.size() - 1 : t.free_op;
    for (std::size_t k = from; k <= to; ++k) live[k] += static_cast<std::int64_t>(t.bytes);
  }
  std::size_t phases[4] = {};
  for (std::size_t k = 0; k < p.ops.size(); ++k) {
    EXPECT_EQ(p.ops[k].bytes_live_after, static_cast<std::uint64_t>(live[k])) << k;
    ++phases[static_cast<int>(p.ops[k].phase)];
  }
  EXPECT_EQ(phases[0], 0u) << "every ResNet op has a phase";
  EXPECT_GT(phases[1], 0u);
  EXPECT_GT(phases[2], phases[1]) << "backward launches more than forward";
  EXPECT_GT(phases[3], 0u);
  const policy::Profile q = policy::ProfileFromJson(policy::ProfileToJson(p));
  EXPECT_EQ(q.ops.size(), p.ops.size());
  EXPECT_EQ(q.tensors.size(), p.tensors.size());
}

}  // namespace
}  // namespace chameleon::trace
