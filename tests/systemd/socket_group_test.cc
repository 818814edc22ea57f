// Group-based socket access: the socket file is handed to the configured group, and a missing
// group is reported (not fatal) with its name.
#include "chameleon/daemon/socket_group.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace chameleon::daemon {
namespace {

class SocketGroupTest : public testing::Test {
 protected:
  void SetUp() override {
    path_ = "/tmp/chameleon-group-" + std::to_string(getpid());
    std::ofstream(path_) << "x";
  }
  void TearDown() override { unlink(path_.c_str()); }
  std::string path_;
};

TEST_F(SocketGroupTest, HandsTheFileToAGroupWeBelongTo) {
  // Any process may chgrp its own file to a group it is a member of: use our primary group.
  const group* mine = getgrgid(getgid());
  ASSERT_NE(mine, nullptr);
  EXPECT_EQ(ApplySocketGroup(path_, mine->gr_name), "");
  struct stat st {};
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, getgid());
}

TEST_F(SocketGroupTest, EmptyGroupLeavesTheFileAlone) {
  EXPECT_EQ(ApplySocketGroup(path_, ""), "");
}

TEST_F(SocketGroupTest, MissingGroupIsNamed) {
  EXPECT_EQ(ApplySocketGroup(path_, "no-such-group-chameleon"),
            "group 'no-such-group-chameleon' does not exist");
}

TEST_F(SocketGroupTest, MissingFileIsNamed) {
  const group* mine = getgrgid(getgid());
  ASSERT_NE(mine, nullptr);
  const std::string error = ApplySocketGroup("/nonexistent/c.sock", mine->gr_name);
  EXPECT_EQ(error, std::string("chgrp ") + mine->gr_name +
                       " /nonexistent/c.sock: No such file or directory");
}

}  // namespace
}  // namespace chameleon::daemon
