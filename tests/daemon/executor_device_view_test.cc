// ExecutorDeviceView: the profile a client's candidates are planned from, seen from the device
// its executor serves (the header's executor_device, device + 1; untrusted).
#include "chameleon/daemon/executor_device_view.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace chameleon::daemon {
namespace {

std::shared_ptr<const policy::Profile> TwoDevices() {
  auto p = std::make_shared<policy::Profile>();
  p->iteration_s = 1;
  p->ops.resize(2);
  for (std::uint16_t device : {0, 1}) {
    policy::ProfileTensor t;
    t.bytes = 100 + device;
    t.device = device;
    t.uses = {0, 1};
    p->tensors.push_back(t);
  }
  return p;
}

class ExecutorDeviceViewTest : public ::testing::Test {
 protected:
  ClientIdentity who_;
  ExecutorDeviceView view_{who_};
};

TEST_F(ExecutorDeviceViewTest, UnknownDeviceLeavesTheProfileAsItIs) {
  const auto p = TwoDevices();
  EXPECT_EQ(view_.ProfileFor(p, 0), p);  // an older shim, or its executor not decided yet
  EXPECT_TRUE(view_.Json()["device"].is_null());
}

TEST_F(ExecutorDeviceViewTest, TheExecutorsDeviceKeepsItsTensorsAndTheOthersTakeNoRoom) {
  const auto p = TwoDevices();
  const auto seen = view_.ProfileFor(p, /*executor_device=*/2);  // device 1
  ASSERT_NE(seen, p);
  EXPECT_EQ(seen->tensors[0].bytes, 0u);
  EXPECT_FALSE(seen->tensors[0].swappable);
  EXPECT_EQ(seen->tensors[1].bytes, 101u);
  EXPECT_TRUE(seen->tensors[1].swappable);
  EXPECT_EQ(view_.ProfileFor(p, 2), seen);  // cached while profile and device stay
  const nlohmann::json j = view_.Json();
  EXPECT_EQ(j["device"], 1);
  EXPECT_EQ(j["other_device_tensors"], 1);
  EXPECT_EQ(j["other_device_bytes"], 100);
  const auto device0 = view_.ProfileFor(p, 1);  // the device changed: projected again
  EXPECT_EQ(device0->tensors[0].bytes, 100u);
  EXPECT_EQ(device0->tensors[1].bytes, 0u);
}

TEST_F(ExecutorDeviceViewTest, AValueNoDeviceOrdinalCanHaveIsIgnored) {
  const auto p = TwoDevices();
  EXPECT_EQ(view_.ProfileFor(p, 65537), p);
  EXPECT_EQ(view_.ProfileFor(p, UINT64_MAX), p);
  EXPECT_EQ(view_.ProfileFor(nullptr, 1), nullptr);
}

}  // namespace
}  // namespace chameleon::daemon
