// Token -> name table.
#include "chameleon/ipc/name_table.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

class NameTableTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &segment_), SegmentError::kOk);
    writer_ = segment_.name_writer();
    reader_ = segment_.name_reader();
  }
  std::map<std::uint32_t, std::string> ReadAll(bool* ok) {
    std::map<std::uint32_t, std::string> names;
    *ok = reader_.ReadNew([&](std::uint32_t t, std::string_view n) { names[t] = std::string(n); });
    return names;
  }
  Segment segment_;
  NameTableWriter writer_;
  NameTableReader reader_;
};

TEST_F(NameTableTest, ShouldReadOnlyEntriesAddedSinceLastCall) {
  ASSERT_TRUE(writer_.Append(16, "ampere_sgemm_128x64"));
  ASSERT_TRUE(writer_.Append(17, ""));
  bool ok = false;
  auto names = ReadAll(&ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(names, (std::map<std::uint32_t, std::string>{{16, "ampere_sgemm_128x64"}, {17, ""}}));
  ASSERT_TRUE(writer_.Append(18, "softmax"));
  names = ReadAll(&ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(names, (std::map<std::uint32_t, std::string>{{18, "softmax"}}));
}

TEST_F(NameTableTest, ShouldTruncateOverlongNames) {
  const std::string longname(kMaxNameBytes + 100, 'x');
  ASSERT_TRUE(writer_.Append(20, longname));
  bool ok = false;
  auto names = ReadAll(&ok);
  EXPECT_TRUE(ok);
  EXPECT_EQ(names[20], longname.substr(0, kMaxNameBytes));
}

TEST_F(NameTableTest, ShouldRefuseWhenFullAndKeepEarlierEntries) {
  const std::string name(100, 'n');  // 8 + 100 -> 112 bytes per entry
  std::uint32_t token = 16;
  while (writer_.Append(token, name)) ++token;
  EXPECT_EQ(token - 16, 4096u / 112u);
  bool ok = false;
  EXPECT_EQ(ReadAll(&ok).size(), 4096u / 112u);
  EXPECT_TRUE(ok);
  EXPECT_TRUE(writer_.Append(999, "ab"));  // a short one may still fit the tail
}

TEST_F(NameTableTest, ShouldContinueAfterEntriesOfAnEarlierWriter) {
  ASSERT_TRUE(writer_.Append(16, "a"));
  NameTableWriter again = segment_.name_writer();
  ASSERT_TRUE(again.Append(17, "b"));
  bool ok = false;
  EXPECT_EQ(ReadAll(&ok), (std::map<std::uint32_t, std::string>{{16, "a"}, {17, "b"}}));
}

}  // namespace
}  // namespace chameleon::ipc
