// Trace -> workload rules on small synthetic traces: which nodes become ops, phases, steps and
// storage lifetimes. Every case runs on both schemas.
#include "chameleon/trace/workload.h"

#include <gtest/gtest.h>

#include "chameleon/trace/reader.h"
#include "trace_fixtures.h"

namespace chameleon::trace {
namespace {

using testing::FakeNode;
using testing::Tensor;

constexpr std::uint64_t kMiB = 1 << 20;

class WorkloadTest : public ::testing::TestWithParam<bool> {
 protected:
  Workload Build(const std::vector<FakeNode>& nodes) {
    trace_ = ParseTrace(testing::Document(nodes, GetParam()), "synthetic.json");
    return BuildWorkload(trace_);
  }
  std::string NameOf(const Workload& w, std::size_t op) const {
    return trace_.nodes[w.ops[op].node].name;
  }

  Trace trace_;
};

// aten::linear -> {aten::t (view), aten::addmm}: only addmm launches, and only once.
TEST_P(WorkloadTest, ShouldCountNestedOpOnceAtItsDeepestDeviceWork) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {10, 2, "aten::linear", {Tensor(100, 50, 64), Tensor(101, 51, 32)}, {Tensor(103, 52, 16)}},
      {11, 10, "aten::t", {Tensor(101, 51, 32)}, {Tensor(102, 51, 32)}},
      {12, 10, "aten::addmm", {Tensor(100, 50, 64), Tensor(102, 51, 32)}, {Tensor(103, 52, 16)}},
  });
  ASSERT_EQ(w.ops.size(), 1u);
  EXPECT_EQ(NameOf(w, 0), "aten::addmm");
  EXPECT_EQ(w.ops[0].reads.size(), 2u);
  ASSERT_EQ(w.ops[0].writes.size(), 1u);
  EXPECT_EQ(w.storages[w.ops[0].writes[0]].storage_id, 52u);
  EXPECT_EQ(w.storages[w.ops[0].writes[0]].bytes, 64u);
}

TEST_P(WorkloadTest, ShouldNotLaunchViewsMetadataOrAllocations) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {3, 2, "aten::empty", {}, {Tensor(100, 50, 64)}},
      {4, 2, "aten::view", {Tensor(100, 50, 64)}, {Tensor(101, 50, 64)}},
      {5, 2, "aten::as_strided", {Tensor(100, 50, 64)}, {Tensor(102, 50, 64)}},
      {6, 2, "aten::expand", {Tensor(100, 50, 64)}, {Tensor(103, 50, 640)}},
      {7, 2, "aten::to", {Tensor(100, 50, 64)}, {Tensor(100, 50, 64)}},  // no-op .to()
      {8, 2, "aten::relu_", {Tensor(101, 50, 64)}, {Tensor(101, 50, 64)}},
  });
  ASSERT_EQ(w.ops.size(), 1u);
  EXPECT_EQ(NameOf(w, 0), "aten::relu_");
  EXPECT_EQ(w.storages.size(), 1u);
  EXPECT_EQ(w.storages[0].bytes, 256u) << "the expanded view must not size the storage";
}

TEST_P(WorkloadTest, ShouldKeepCollectivesWithTheirBuffers) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {3, 2, "c10d::allreduce_", {Tensor(100, 50, 1024)}, {Tensor(100, 50, 1024)}},
      {4, 3, "record_param_comms", {Tensor(100, 50, 1024)}, {Tensor(100, 50, 1024)}},
      {5, 4, "nccl:all_reduce", {Tensor(100, 50, 1024)}, {Tensor(100, 50, 1024)}},
  });
  ASSERT_EQ(w.ops.size(), 1u);
  EXPECT_EQ(NameOf(w, 0), "nccl:all_reduce");
  EXPECT_EQ(w.ops[0].kind, OpKind::kCollective);
  EXPECT_EQ(w.ops[0].reads, w.ops[0].writes);
  EXPECT_EQ(w.ops[0].reads.size(), 1u);
}

TEST_P(WorkloadTest, ShouldCutIterationsAtProfilerSteps) {
  std::vector<FakeNode> nodes = {{2, 1, "[pytorch|profiler|execution_trace|thread]"}};
  // Step 1: two ops; step 2: three ops. The backward thread's op (id 13) belongs to the step
  // whose range contains its id although its parent is another thread root.
  nodes.push_back({10, 2, "ProfilerStep#1"});
  nodes.push_back({11, 10, "aten::mul", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}});
  nodes.push_back({12, 2, "[pytorch|profiler|execution_trace|thread]"});
  nodes.push_back({13, 12, "aten::add", {Tensor(101, 51, 8)}, {Tensor(102, 52, 8)}});
  nodes.push_back({20, 2, "ProfilerStep#2"});
  for (int i = 0; i < 3; ++i)
    nodes.push_back({21 + i, 20, "aten::mul", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}});
  const Workload w = Build(nodes);
  ASSERT_EQ(w.steps.size(), 2u);
  EXPECT_EQ(w.steps[0].name, "ProfilerStep#1");
  EXPECT_EQ(w.steps[0].end_op - w.steps[0].first_op, 2u);
  EXPECT_EQ(w.steps[1].end_op - w.steps[1].first_op, 3u);
  EXPECT_EQ(w.steps[1].first_op, w.steps[0].end_op);
}

// The profiler opened ProfilerStep#3 as the file closed: it encloses no op and is no iteration
// (replayed, it would take ~0 s and halve every average over recent iterations).
TEST_P(WorkloadTest, ShouldNotCountAnEmptyLastStepAsAnIteration) {
  std::vector<FakeNode> nodes = {{2, 1, "[pytorch|profiler|execution_trace|thread]"}};
  for (int s = 0; s < 2; ++s) {
    const int base = 10 * (s + 1);
    nodes.push_back({base, 2, "ProfilerStep#" + std::to_string(s + 1)});
    nodes.push_back({base + 1, base, "aten::mul", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}});
  }
  nodes.push_back({30, 2, "ProfilerStep#3"});
  const Workload w = Build(nodes);
  ASSERT_EQ(w.steps.size(), 2u);
  EXPECT_EQ(w.steps[1].name, "ProfilerStep#2");
  EXPECT_EQ(w.steps[1].end_op - w.steps[1].first_op, 1u);
  ASSERT_EQ(w.ops.size(), 2u);
  EXPECT_EQ(w.ops[1].step, 1u);
}

// Storage 60 is created, used and dead, then re-created larger: two lifetimes, so the peak is
// the larger one plus what is live beside it, never the sum of both.
TEST_P(WorkloadTest, ShouldSplitReusedStorageIdAtReCreation) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {3, 2, "aten::empty", {}, {Tensor(100, 60, kMiB, 1)}},
      {4, 2, "aten::fill_", {Tensor(100, 60, kMiB, 1)}, {Tensor(100, 60, kMiB, 1)}},
      {5, 2, "aten::sum", {Tensor(100, 60, kMiB, 1)}, {Tensor(101, 61, 1)}},
      {6, 2, "aten::empty", {}, {Tensor(102, 60, 2 * kMiB, 1)}},
      {7, 2, "aten::fill_", {Tensor(102, 60, 2 * kMiB, 1)}, {Tensor(102, 60, 2 * kMiB, 1)}},
      {8, 2, "aten::sum", {Tensor(102, 60, 2 * kMiB, 1)}, {Tensor(101, 61, 1)}},
  });
  ASSERT_EQ(w.ops.size(), 4u);
  std::vector<const StorageInstance*> s60;
  for (const auto& s : w.storages) {
    if (s.storage_id == 60) s60.push_back(&s);
  }
  ASSERT_EQ(s60.size(), 2u);
  EXPECT_EQ(s60[0]->bytes, kMiB);
  EXPECT_EQ(s60[0]->last_use, 1);
  EXPECT_EQ(s60[1]->bytes, 2 * kMiB);
  EXPECT_EQ(s60[1]->create_op, 2);
  // Storage 61 (4 bytes) is re-created by op 3's aten::sum as well; at op 3 the live set is the
  // new 2 MiB lifetime of 60 plus 61's second lifetime.
  EXPECT_EQ(PeakBytes(w), 2 * kMiB + 4);
}

TEST_P(WorkloadTest, ShouldTagPhasesFromMarkers) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {3, 2, "## forward ##"},
      {4, 3, "aten::mul", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}},
      {5, 2, "autograd::engine::evaluate_function: MulBackward0"},
      {6, 5, "MulBackward0"},
      {7, 6, "aten::mul", {Tensor(101, 51, 8)}, {Tensor(102, 52, 8)}},
      {8, 2, "Optimizer.step#SGD.step"},
      {9, 8, "aten::_foreach_add_", {Tensor(100, 50, 8), Tensor(102, 52, 8)}, {}},
  });
  ASSERT_EQ(w.ops.size(), 3u);
  EXPECT_EQ(w.ops[0].phase, policy::Phase::kForward);
  EXPECT_EQ(w.ops[1].phase, policy::Phase::kBackward);
  EXPECT_EQ(w.ops[2].phase, policy::Phase::kOptimizer);
}

// torch.compile regions: the Triton kernel node has no tensors; it writes what its region
// allocated and reads its nearest ancestor's inputs.
TEST_P(WorkloadTest, ShouldGiveInductorKernelsTheirRegionsBuffers) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {3, 2, "GeLUFunction", {Tensor(100, 50, 64)}, {}},
      {4, 3, "Torch-Compiled Region"},
      {5, 4, "aten::empty", {}, {Tensor(101, 51, 64)}},
      {6, 4, "triton_poi_fused_gelu_0"},
  });
  ASSERT_EQ(w.ops.size(), 1u);
  EXPECT_EQ(NameOf(w, 0), "triton_poi_fused_gelu_0");
  ASSERT_EQ(w.ops[0].reads.size(), 1u);
  ASSERT_EQ(w.ops[0].writes.size(), 1u);
  EXPECT_EQ(w.storages[w.ops[0].reads[0]].storage_id, 50u);
  EXPECT_EQ(w.storages[w.ops[0].writes[0]].storage_id, 51u);
}

TEST_P(WorkloadTest, ShouldKeepPreExistingStoragesPersistent) {
  const Workload w = Build({
      {2, 1, "[pytorch|profiler|execution_trace|thread]"},
      {3, 2, "aten::mul", {Tensor(100, 50, 8)}, {Tensor(101, 51, 8)}},
      {4, 2, "aten::add_", {Tensor(100, 50, 8), Tensor(101, 51, 8)}, {Tensor(100, 50, 8)}},
  });
  ASSERT_EQ(w.storages.size(), 2u);
  const auto& s50 = w.storages[0].storage_id == 50 ? w.storages[0] : w.storages[1];
  const auto& s51 = w.storages[0].storage_id == 50 ? w.storages[1] : w.storages[0];
  EXPECT_TRUE(s50.persistent);  // a parameter, there before the trace
  EXPECT_EQ(s50.create_op, -1);
  EXPECT_FALSE(s51.persistent);  // created and dead within the step
  EXPECT_EQ(s51.create_op, 0);
  EXPECT_EQ(LiveBytesPerOp(w, 0), (std::vector<std::uint64_t>{64, 64}));
}

INSTANTIATE_TEST_SUITE_P(Schemas, WorkloadTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "Chakra103" : "Flat101"; });

}  // namespace
}  // namespace chameleon::trace
