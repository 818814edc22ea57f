// CHAMELEON_STATS_FILE records (shim/src/executor_stats.h): written here from made-up counter
// values and read back with the reader the end-to-end tests use.
#include "executor_stats.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "stats_file_reader.h"

namespace chameleon::shim {
namespace {

using testing::ReadStatsFile;
using testing::StatsRecord;

std::size_t Index(const char* stat) {
  const std::size_t i = ipc::ExecutorCounterIndex(stat);
  EXPECT_LT(i, ipc::kExecutorCounterCount) << stat;
  return i;
}

class StatsFileTest : public ::testing::Test {
 protected:
  void TearDown() override { ::unlink(path_.c_str()); }
  const std::string path_ = "/tmp/chameleon_stats_file_test_" + std::to_string(::getpid());
};

TEST_F(StatsFileTest, EachRecordCarriesTheSpansDeltasTheTotalsAndTheGenerationInForce) {
  StatsFile file;
  ASSERT_TRUE(file.Open(path_.c_str()));
  swap::CounterValues v{};
  v[Index("swap_out_bytes")] = 1000;
  v[Index("prefetch_misses")] = 3;
  v[Index("host_pool_bytes")] = 4096;  // a gauge: reported as its level, never as a delta
  v[Index("iterations")] = 1;
  file.Write("iteration", v, /*generation=*/0, /*limit=*/64);
  v[Index("swap_out_bytes")] = 1500;
  v[Index("prefetch_misses")] = 3;
  v[Index("host_pool_bytes")] = 1024;
  v[Index("iterations")] = 2;
  file.Write("iteration", v, 7, 64);
  v[Index("swap_out_bytes")] = 1600;
  file.Write("exit", v, 7, 64);

  const std::vector<StatsRecord> records = ReadStatsFile(path_);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0].event, "iteration");
  EXPECT_EQ(records[0].pid, static_cast<std::uint64_t>(::getpid()));
  EXPECT_EQ(records[0].iteration, 1u);
  EXPECT_EQ(records[0].generation_in_force, 0u);
  EXPECT_EQ(records[0].limit, 64u);
  EXPECT_EQ(records[0].counters.at("swap_out_bytes"), 1000u);
  EXPECT_EQ(records[1].iteration, 2u);
  EXPECT_EQ(records[1].generation_in_force, 7u);
  EXPECT_EQ(records[1].counters.at("swap_out_bytes"), 500u);
  EXPECT_EQ(records[1].totals.at("swap_out_bytes"), 1500u);
  EXPECT_EQ(records[1].counters.at("prefetch_misses"), 0u);
  EXPECT_EQ(records[1].totals.at("prefetch_misses"), 3u);
  EXPECT_EQ(records[1].counters.at("host_pool_bytes"), 1024u);
  EXPECT_EQ(records[1].totals.at("host_pool_bytes"), 1024u);
  EXPECT_EQ(records[2].event, "exit");
  EXPECT_EQ(records[2].iteration, 2u);  // no boundary since: the exit covers a partial span
  EXPECT_EQ(records[2].counters.at("swap_out_bytes"), 100u);
  EXPECT_EQ(testing::ExitTotals(records).at("swap_out_bytes"), 1600u);
  EXPECT_EQ(testing::ExitTotals(records).at("limit"), 64u);
}

TEST_F(StatsFileTest, EveryCounterOfTheTableIsInEveryRecordUnderItsStatsLineName) {
  StatsFile file;
  ASSERT_TRUE(file.Open(path_.c_str()));
  file.Write("exit", swap::CounterValues{}, 0, 0);
  const std::vector<StatsRecord> records = ReadStatsFile(path_);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].counters.size(), ipc::kExecutorCounterCount);
  EXPECT_EQ(records[0].totals.size(), ipc::kExecutorCounterCount);
  // Today's names of the CHAMELEON_DEBUG=stats line, which scripts/demo and scripts/evaluate read.
  for (
      const char* name :
      {"swap_out_bytes",    "swap_in_bytes",  "fault_ins",       "evictions",     "stalls",
       "stall_ns",          "prefetch_hits",  "prefetch_misses", "vmm_calls",     "chunk_bytes",
       "policy_generation", "policy_ignored", "iterations",      "forced_unmaps", "unmaps",
       "device_syncs",      "reclaims",       "remap_reclaims",  "vmm_maps",      "vmm_unmaps",
       "vmm_reserves",      "vmm_creates",    "chunk_creates",   "chunk_reuses",  "range_reuses"}) {
    EXPECT_EQ(records[0].totals.count(name), 1u) << name;
  }
}

TEST_F(StatsFileTest, AppendsToAnExistingFileAndAnUnopenablePathWritesNothing) {
  for (int run = 0; run < 2; ++run) {
    StatsFile file;
    ASSERT_TRUE(file.Open(path_.c_str()));
    file.Write("exit", swap::CounterValues{}, 0, 0);
  }
  EXPECT_EQ(ReadStatsFile(path_).size(), 2u);
  StatsFile nowhere;
  EXPECT_FALSE(nowhere.Open("/nonexistent/dir/stats.jsonl"));
  nowhere.Write("exit", swap::CounterValues{}, 0, 0);  // no-op, no crash
  EXPECT_FALSE(nowhere.is_open());
}

TEST(StatsLineTest, PairsFollowTheTableOrderWithTodaysNames) {
  swap::CounterValues v{};
  v[ipc::ExecutorCounterIndex("prefetch_misses")] = 12;
  v[ipc::ExecutorCounterIndex("stalls")] = 5;
  const std::string line = FormatCounterPairs(v);
  EXPECT_EQ(line.rfind(" swap_out_bytes=0 swap_in_bytes=0 stalls=5 ", 0), 0u) << line;
  EXPECT_NE(line.find(" prefetch_misses=12 "), std::string::npos) << line;
}

}  // namespace
}  // namespace chameleon::shim
