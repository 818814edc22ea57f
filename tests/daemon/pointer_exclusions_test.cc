#include "chameleon/daemon/pointer_exclusions.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chameleon/daemon/profile_builder.h"
#include "chameleon/ipc/event_records.h"

namespace chameleon::daemon {
namespace {

/// One iteration: allocation `a` (1 MiB) written by op 20, allocation `b` (2 MiB) by op 21 which
/// also reads `a`. The same roles get the same keys whatever the ids.
std::shared_ptr<const policy::Profile> Iteration(std::uint64_t a, std::uint64_t b) {
  const std::unordered_map<std::uint64_t, LiveAllocation> live;
  ProfileBuilder builder;
  builder.Begin(&live);
  builder.AddAlloc(a, 1u << 20, true);
  builder.AddOp(20, {}, a);
  builder.AddAlloc(b, 2u << 20, true);
  const std::uint64_t reads[] = {a};
  builder.AddOp(21, reads, b);
  return std::make_shared<policy::Profile>(builder.Finish({}, 0.1, "test"));
}

bool Swappable(const policy::Profile& profile, std::uint64_t id) {
  for (const auto& t : profile.tensors) {
    if (t.external_id == id) return t.swappable;
  }
  ADD_FAILURE() << "no tensor " << id;
  return false;
}

bool Pinned(const policy::Profile& profile, std::uint64_t id) {
  for (const auto& t : profile.tensors) {
    if (t.external_id == id) return t.pinned;
  }
  ADD_FAILURE() << "no tensor " << id;
  return false;
}

class PointerExclusionsTest : public ::testing::Test {
 protected:
  ClientIdentity who_;
  PointerExclusions exclusions_{who_};
  std::unordered_map<std::uint64_t, LiveAllocation> live_;
};

TEST_F(PointerExclusionsTest, NothingReportedLeavesTheProfileAsItIs) {
  const auto profile = Iteration(1, 2);
  EXPECT_EQ(exclusions_.ProfileFor(profile), profile);
  EXPECT_EQ(exclusions_.ProfileFor(nullptr), nullptr);
}

TEST_F(PointerExclusionsTest, AReportedTensorAndItsRoleInLaterProfilesAreKept) {
  const auto first = Iteration(1, 2);
  live_[2] = {2u << 20, true};
  const std::uint64_t ids[] = {2, ipc::kNoAllocation};
  exclusions_.Report(1, ids, &live_, first);
  EXPECT_FALSE(live_[2].swappable);  // a later detailed iteration records it unswappable ...
  EXPECT_TRUE(live_[2].pinned);      // ... and held in whole chunks (policy::DeviceBytes)
  EXPECT_EQ(exclusions_.target_ids(), 1u);
  EXPECT_EQ(exclusions_.excluded_keys(), 1u);
  const auto marked = exclusions_.ProfileFor(first);
  EXPECT_TRUE(Swappable(*marked, 1));
  EXPECT_FALSE(Swappable(*marked, 2));
  EXPECT_TRUE(Pinned(*marked, 2));
  EXPECT_FALSE(Pinned(*marked, 1));
  EXPECT_TRUE(Swappable(*first, 2));  // the recorded profile itself is not changed
  // The program allocates the same tensor afresh: new ids, same role, still excluded.
  const auto later = exclusions_.ProfileFor(Iteration(11, 12));
  EXPECT_TRUE(Swappable(*later, 11));
  EXPECT_FALSE(Swappable(*later, 12));
  const nlohmann::json j = exclusions_.Json();
  EXPECT_EQ(j["reports"], 1);
  EXPECT_EQ(j["excluded_tensors"], 1);
}

TEST_F(PointerExclusionsTest, TheMarkedProfileIsCachedUntilSomethingChanges) {
  const auto profile = Iteration(1, 2);
  const std::uint64_t ids[] = {1};
  exclusions_.Report(1, ids, &live_, profile);
  const auto once = exclusions_.ProfileFor(profile);
  EXPECT_EQ(exclusions_.ProfileFor(profile), once);
  exclusions_.Report(2, ids, &live_, profile);  // nothing new
  EXPECT_EQ(exclusions_.ProfileFor(profile), once);
  const std::uint64_t more[] = {2};
  exclusions_.Report(3, more, &live_, profile);
  const auto again = exclusions_.ProfileFor(profile);
  EXPECT_NE(again, once);
  EXPECT_FALSE(Swappable(*again, 1));
  EXPECT_FALSE(Swappable(*again, 2));
}

TEST_F(PointerExclusionsTest, TargetIdsAreBoundedOldestFirst) {
  std::vector<std::uint64_t> ids(PointerExclusions::kMaxExclusions + 10);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = 100 + i;
  exclusions_.Report(1, ids, &live_, nullptr);  // no profile: no keys learnt
  EXPECT_EQ(exclusions_.target_ids(), PointerExclusions::kMaxExclusions);
  // The oldest ten were forgotten, the newest are kept.
  const auto marked = exclusions_.ProfileFor(Iteration(100, ids.back()));
  EXPECT_TRUE(Swappable(*marked, 100));
  EXPECT_FALSE(Swappable(*marked, ids.back()));
}

}  // namespace
}  // namespace chameleon::daemon
