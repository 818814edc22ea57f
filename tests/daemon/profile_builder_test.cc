#include "chameleon/daemon/profile_builder.h"

#include <gtest/gtest.h>

#include "chameleon/ipc/event_records.h"
#include "chameleon/policy/profile_json.h"

namespace chameleon::daemon {
namespace {

TEST(ProfileBuilder, AssemblesOpsTensorsLifetimesAndMemory) {
  // 8: a pointer-table target the executor serves (pinned); 7: an ordinary tensor.
  std::unordered_map<std::uint64_t, LiveAllocation> live{{7, {4096, true}},
                                                         {8, {512, false, 0, true}}};
  ProfileBuilder builder;
  builder.Begin(&live);
  builder.AddAlloc(9, 1024, true);
  const std::uint64_t first[] = {7, 9};
  builder.AddOp(20, first, ipc::kNoAllocation);
  builder.AddMemInfo(5632);
  const std::uint64_t second[] = {9, 8, 9};
  builder.AddOp(21, second, ipc::kNoAllocation);
  builder.AddFree(9);
  builder.AddMemInfo(4608);
  builder.AddOp(ipc::kTokenCopyDtoH, std::span<const std::uint64_t>(first, 1), ipc::kNoAllocation);
  const auto profile = builder.Finish({{20, "gemm"}}, 0.25, "test");

  ASSERT_EQ(profile.ops.size(), 3u);
  EXPECT_EQ(profile.ops[0].name, "gemm");
  EXPECT_EQ(profile.ops[1].name, "");
  EXPECT_EQ(profile.ops[1].reads.size(), 2u);  // duplicates removed
  EXPECT_EQ(profile.ops[0].bytes_live_after, 5632u);
  EXPECT_EQ(profile.ops[1].bytes_live_after, 4608u);
  EXPECT_EQ(profile.ops[2].bytes_live_after, 4608u);
  ASSERT_EQ(profile.tensors.size(), 3u);
  // Tensor 0 is allocation 9 (allocated before op 0, freed after op 1).
  EXPECT_EQ(profile.tensors[0].external_id, 9u);
  EXPECT_EQ(profile.tensors[0].alloc_op, 0);
  EXPECT_EQ(profile.tensors[0].free_op, 1);
  EXPECT_EQ(profile.tensors[0].uses, (std::vector<std::uint32_t>{0, 1}));
  // Allocation 7 was live before the iteration: sized from the live table, never freed.
  EXPECT_EQ(profile.tensors[1].external_id, 7u);
  EXPECT_EQ(profile.tensors[1].bytes, 4096u);
  EXPECT_EQ(profile.tensors[1].alloc_op, -1);
  EXPECT_EQ(profile.tensors[1].free_op, -1);
  EXPECT_EQ(profile.tensors[1].uses, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_FALSE(profile.tensors[2].swappable);
  EXPECT_TRUE(profile.tensors[2].pinned);
  EXPECT_FALSE(profile.tensors[1].pinned);
  EXPECT_DOUBLE_EQ(profile.iteration_s, 0.25);
  // The documented JSON form accepts it.
  const auto round_trip = policy::ProfileFromJson(policy::ProfileToJson(profile));
  EXPECT_EQ(round_trip.ops.size(), 3u);
  EXPECT_EQ(round_trip.tensors.size(), 3u);
}

// Issue 16: a process driving several devices records tensors of each; the device planned for
// is chosen later (ExecutorDeviceView), so the builder keeps each tensor's own.
TEST(ProfileBuilder, KeepsTheDeviceOfEveryTensorAllocatedBeforeOrDuringTheIteration) {
  std::unordered_map<std::uint64_t, LiveAllocation> live{{7, {4096, true, 2}}};
  ProfileBuilder builder;
  builder.Begin(&live);
  builder.AddAlloc(9, 1024, true, /*device=*/3);
  const std::uint64_t reads[] = {7, 9};
  builder.AddOp(20, reads, ipc::kNoAllocation);
  const auto profile = builder.Finish({}, 0.25, "test");
  ASSERT_EQ(profile.tensors.size(), 2u);
  EXPECT_EQ(profile.tensors[0].external_id, 9u);
  EXPECT_EQ(profile.tensors[0].device, 3u);
  EXPECT_EQ(profile.tensors[1].external_id, 7u);
  EXPECT_EQ(profile.tensors[1].device, 2u);
}

}  // namespace
}  // namespace chameleon::daemon
