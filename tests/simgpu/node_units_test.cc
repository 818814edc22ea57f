// The pure parsers behind a node of several processes, compiled in (the library exports only the
// driver ABI): /proc/<pid>/stat (process_start.h) and CUDA_VISIBLE_DEVICES (visible_devices.h).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "process_start.h"
#include "visible_devices.h"

namespace chameleon::simgpu {
namespace {

// Fields 3..22 of a stat line: state, then 18 numbers, then starttime (here 4242).
std::string StatLine(const std::string& comm, char state) {
  std::string s = "1234 (" + comm + ") ";
  s += state;
  for (int field = 4; field <= 21; ++field) s += " " + std::to_string(field);
  return s + " 4242 99 100\n";
}

ProcessStatus Parse(const std::string& text) {
  ProcessStatus st;
  st.start_time = 7;
  st.running = true;
  if (!ParseProcStat(text.data(), text.size(), &st)) return ProcessStatus{false, 0};
  return st;
}

TEST(ProcStat, ReadsStateAndStartTimeAfterTheLastParenthesis) {
  const ProcessStatus st = Parse(StatLine("a) b (c", 'S'));
  EXPECT_TRUE(st.running);
  EXPECT_EQ(st.start_time, 4242u);
}

TEST(ProcStat, AZombieIsNotRunning) {
  const ProcessStatus st = Parse(StatLine("x", 'Z'));
  EXPECT_FALSE(st.running);
  EXPECT_EQ(st.start_time, 4242u);
}

TEST(ProcStat, TruncatedOrMalformedLinesAreRejected) {
  ProcessStatus st;
  const std::string full = StatLine("x", 'R');
  for (std::size_t cut : {0ul, 5ul, 9ul, full.size() - 14}) {
    EXPECT_FALSE(ParseProcStat(full.data(), cut, &st)) << cut;
  }
  const std::string no_paren = "1234 x R 1 2 3";
  EXPECT_FALSE(ParseProcStat(no_paren.data(), no_paren.size(), &st));
}

TEST(ProcStat, ThisProcessIsRunningWithAStableStartTime) {
  const ProcessStatus a = ReadProcessStatus(getpid());
  const ProcessStatus b = ReadProcessStatus(getpid());
  EXPECT_TRUE(a.running);
  EXPECT_GT(a.start_time, 0u);
  EXPECT_EQ(a.start_time, b.start_time);
  EXPECT_FALSE(ReadProcessStatus(0).running);
  EXPECT_FALSE(ReadProcessStatus(-5).running);
}

std::vector<int> Visible(const std::string& text, int node_devices) {
  std::vector<int> out{-7};
  if (!ParseVisibleDevices(text, node_devices, &out).empty()) return {-1};
  return out;
}

TEST(VisibleDevices, IndicesAndUuidsInListOrder) {
  EXPECT_EQ(Visible("3", 4), (std::vector<int>{3}));
  EXPECT_EQ(Visible(" 2 , 0,1 ", 4), (std::vector<int>{2, 0, 1}));
  EXPECT_EQ(Visible("12,0", 16), (std::vector<int>{12, 0}));
  EXPECT_EQ(Visible(NodeDeviceUuidString(1) + ",0", 2), (std::vector<int>{1, 0}));
  EXPECT_EQ(NodeDeviceUuidString(10), "GPU-73696d67-7075-0000-0000-00000000000a");
}

TEST(VisibleDevices, AnythingElseIsRejected) {
  for (const char* bad :
       {"", " ", "4", "-1", "1,1", "0,", ",0", "a", "0x1", "1.0", "007", "MIG-1234",
        "GPU-73696d67-7075-0000-0000-000000000004",     // a device past the node
        "GPU-00000000-0000-0000-0000-000000000001",     // not a simgpu UUID
        "GPU-73696d67-7075-0000-0000-0000000000",       // short
        "GPU-73696d6707075-0000-0000-000000000001"}) {  // dash misplaced
    EXPECT_EQ(Visible(bad, 4), (std::vector<int>{-1})) << "'" << bad << "'";
  }
}

}  // namespace
}  // namespace chameleon::simgpu
