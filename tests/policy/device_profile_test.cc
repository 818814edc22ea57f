// ProjectToDevice: a profile of a process driving several devices, planned for one of them.
#include "chameleon/policy/device_profile.h"

#include <gtest/gtest.h>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/profile_json.h"
#include "hand_profiles.h"

namespace chameleon::policy {
namespace {

using testing::HandOptions;
using testing::SixOps;
using testing::Tensor;

/// SixOps(5) on device 0 (A swappable, over a 250-byte limit by 50 at ops 2-3), plus a device-1
/// tensor of 1000 bytes read by every op, listed in each op's reads *before* device 0's tensors:
/// its position must survive the projection (the shim binds swaps by argument position).
Profile TwoDeviceProfile() {
  Profile p = SixOps(5);
  ProfileTensor other = Tensor(1000, -1, -1, {0, 1, 2, 3, 4, 5});
  other.device = 1;
  p.tensors.push_back(other);
  const auto other_index = static_cast<std::uint32_t>(p.tensors.size() - 1);
  for (std::uint32_t i = 0; i < p.ops.size(); ++i) {
    p.ops[i].reads = {other_index};
    for (std::uint32_t t = 0; t < other_index; ++t) {
      for (std::uint32_t use : p.tensors[t].uses) {
        if (use == i) p.ops[i].reads.push_back(t);
      }
    }
    p.ops[i].bytes_live_after = 1300;
  }
  return p;
}

TEST(DeviceProfile, OtherDevicesTensorsTakeNoRoomAndAreNeverPlanned) {
  const Profile p = TwoDeviceProfile();
  const DeviceProjection d = ProjectToDevice(p, 0);
  EXPECT_EQ(d.other_tensors, 1u);
  EXPECT_EQ(d.other_bytes, 1000u);
  ASSERT_EQ(d.profile.tensors.size(), p.tensors.size());
  const ProfileTensor& other = d.profile.tensors.back();
  EXPECT_EQ(other.bytes, 0u);
  EXPECT_FALSE(other.swappable);
  EXPECT_EQ(other.uses, p.tensors.back().uses);
  for (std::size_t t = 0; t + 1 < p.tensors.size(); ++t) {
    EXPECT_EQ(d.profile.tensors[t].bytes, p.tensors[t].bytes);
    EXPECT_EQ(d.profile.tensors[t].swappable, p.tensors[t].swappable);
  }
  // The op sequence and every argument position stay; the per-op measurement (of whichever
  // device the op ran on) is dropped.
  ASSERT_EQ(d.profile.ops.size(), p.ops.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) {
    EXPECT_EQ(d.profile.ops[i].token, p.ops[i].token);
    EXPECT_EQ(d.profile.ops[i].reads, p.ops[i].reads);
    EXPECT_EQ(d.profile.ops[i].writes, p.ops[i].writes);
    EXPECT_EQ(d.profile.ops[i].bytes_live_after, 0u);
  }
}

TEST(DeviceProfile, ADeviceZeroPlanIgnoresTheOtherDevicesBytes) {
  const Profile p = TwoDeviceProfile();
  // All devices counted against device 0's limit: 1000 bytes that cannot move, never feasible.
  const GenerateResult whole = GeneratePlan(p, HandOptions(200));
  EXPECT_FALSE(whole.ok());
  // Device 0 alone: the six-op case's answer, A swapped out after op 0 and back from op 4.
  const GenerateResult device0 = GeneratePlan(ProjectToDevice(p, 0).profile, HandOptions(200));
  ASSERT_TRUE(device0.ok()) << device0.message;
  const GenerateResult single = GeneratePlan(SixOps(5), HandOptions(200));
  ASSERT_TRUE(single.ok()) << single.message;
  ASSERT_EQ(device0.plan.swaps.size(), 1u);
  ASSERT_EQ(single.plan.swaps.size(), 1u);
  EXPECT_EQ(device0.plan.swaps[0].tensor, 0u);
  EXPECT_EQ(device0.plan.swaps[0].out_after_op, single.plan.swaps[0].out_after_op);
  EXPECT_EQ(device0.plan.swaps[0].in_start_op, single.plan.swaps[0].in_start_op);
  // Device 1 alone: its tensor is unswappable there and over 250 bytes on its own.
  EXPECT_FALSE(GeneratePlan(ProjectToDevice(p, 1).profile, HandOptions(200)).ok());
}

TEST(DeviceProfile, ASingleDeviceProfileComesBackUnchanged) {
  Profile p = SixOps(5);
  p.ops[2].bytes_live_after = 300;
  const DeviceProjection d = ProjectToDevice(p, 0);
  EXPECT_EQ(d.other_tensors, 0u);
  EXPECT_EQ(d.other_bytes, 0u);
  EXPECT_EQ(ProfileToJson(d.profile), ProfileToJson(p));
}

}  // namespace
}  // namespace chameleon::policy
