// The swap executor's counters (SegmentHeader slots 5 and 7) reach the Prometheus families and
// `chameleonctl client ID`: values as published, deltas across clients of one slot, a counter
// that goes backwards ignored, gauges reset when the client leaves.
#include <regex>

#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

class ExecutorMetricsTest : public DaemonTest {
 protected:
  /// The value of the series `name{labels}` in the daemon's exposition, or -1 when absent.
  double Series(const std::string& name, const std::string& labels) {
    const std::string text = Control({{"command", "metrics"}})["text"];
    const std::regex re("\n" + name + "\\{" + labels + "\\} ([-0-9.e+]+)");
    std::smatch m;
    return std::regex_search(text, m, re) ? std::stod(m[1]) : -1;
  }
  bool WaitSeries(const std::string& name, const std::string& labels, double value) {
    return WaitFor([&] { return Series(name, labels) == value; });
  }
  /// Publishes executor counters the way the shim's SwapCounters::PublishTo does.
  static void Publish(ipc::SegmentHeader* h, std::uint64_t base) {
    constexpr auto r = std::memory_order_relaxed;
    h->swap_out_bytes.store(base * 1000, r);
    h->swap_in_bytes.store(base * 900, r);
    h->stall_count.store(base * 2, r);
    h->stall_ns.store(base * 500'000'000, r);
    h->prefetch_hits.store(base * 30, r);
    h->prefetch_misses.store(base * 3, r);
    h->host_pool_bytes.store(base * 4096, r);
    h->vmm_calls.store(base * 77, r);
    h->fault_ins.store(base, r);
    h->evictions.store(base * 5, r);
    h->policy_ignored.store(base * 4, r);
    h->executor_iterations.store(base * 10, r);
    h->last_iteration_vmm_calls.store(base + 6, r);
    h->last_iteration_swap_out_bytes.store(base * 100, r);
    h->last_iteration_swap_in_bytes.store(base * 90, r);
    h->policy_generation_applied.store(base + 1, r);
    h->device_limit_bytes.store(64ull << 20, r);
  }
};

TEST_F(ExecutorMetricsTest, EveryPublishedCounterIsExportedUnderTheClientsSlot) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Publish(client->header(), 2);
  const std::string c = "client=\"0\"";
  ASSERT_TRUE(WaitSeries("chameleon_swap_bytes_total", c + ",direction=\"out\"", 2000));
  EXPECT_TRUE(WaitSeries("chameleon_swap_bytes_total", c + ",direction=\"in\"", 1800));
  EXPECT_TRUE(WaitSeries("chameleon_swap_stalls_total", c, 4));
  EXPECT_TRUE(WaitSeries("chameleon_swap_stall_seconds_total", c, 1));
  EXPECT_TRUE(WaitSeries("chameleon_prefetch_hits_total", c, 60));
  EXPECT_TRUE(WaitSeries("chameleon_prefetch_misses_total", c, 6));
  EXPECT_TRUE(WaitSeries("chameleon_host_pool_bytes", c, 8192));
  EXPECT_TRUE(WaitSeries("chameleon_vmm_calls_total", c, 154));
  EXPECT_TRUE(WaitSeries("chameleon_vmm_calls_last_iteration", c, 8));
  EXPECT_TRUE(WaitSeries("chameleon_swap_last_iteration_bytes", c + ",direction=\"out\"", 200));
  EXPECT_TRUE(WaitSeries("chameleon_swap_last_iteration_bytes", c + ",direction=\"in\"", 180));
  EXPECT_TRUE(WaitSeries("chameleon_swap_fault_ins_total", c, 2));
  EXPECT_TRUE(WaitSeries("chameleon_swap_evictions_total", c, 10));
  EXPECT_TRUE(WaitSeries("chameleon_policy_entries_ignored_total", c, 8));
  EXPECT_TRUE(WaitSeries("chameleon_policy_generation_applied", c, 3));
  EXPECT_TRUE(WaitSeries("chameleon_device_limit_bytes", c, 64 << 20));
}

TEST_F(ExecutorMetricsTest, ClientDescriptionCarriesTheCountersAndThePolicyInForce) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  Publish(client->header(), 3);
  nlohmann::json d;
  ASSERT_TRUE(WaitFor([&] {
    d = Describe(client->id());
    return d.is_object() && d["swap"]["fault_ins"] == 3;
  })) << d.dump(2);
  const auto& s = d["swap"];
  EXPECT_EQ(s["out_bytes"], 3000);
  EXPECT_EQ(s["in_bytes"], 2700);
  EXPECT_EQ(s["stalls"], 6);
  EXPECT_DOUBLE_EQ(s["stall_s"].get<double>(), 1.5);
  EXPECT_EQ(s["prefetch_hits"], 90);
  EXPECT_EQ(s["prefetch_misses"], 9);
  EXPECT_EQ(s["host_pool_bytes"], 12288);
  EXPECT_EQ(s["vmm_calls"], 231);
  EXPECT_EQ(s["evictions"], 15);
  EXPECT_EQ(s["policy_ignored"], 12);
  EXPECT_EQ(s["iterations"], 30);
  EXPECT_EQ(s["last_iteration"]["vmm_calls"], 9);
  EXPECT_EQ(s["last_iteration"]["out_bytes"], 300);
  EXPECT_EQ(s["last_iteration"]["in_bytes"], 270);
  // No policy of this daemon has generation 4: the in-force block says so instead of guessing.
  EXPECT_EQ(d["policy"]["in_force"]["generation"], 4);
  EXPECT_TRUE(d["policy"]["in_force"]["predicted_iteration_s"].is_null());
}

TEST_F(ExecutorMetricsTest, ACounterGoingBackwardsIsIgnoredAndGrowthResumesFromThePeak) {
  StartDaemon();
  auto client = Connect();
  ASSERT_NE(client, nullptr);
  const std::string c = "client=\"0\"";
  Publish(client->header(), 5);
  ASSERT_TRUE(WaitSeries("chameleon_swap_evictions_total", c, 25));
  Publish(client->header(), 1);  // a misbehaving client rewinds its counters
  // The daemon copies on its 20 ms housekeeping timer; once it has seen the rewound gauge, it has
  // also seen (and ignored) the rewound counters.
  ASSERT_TRUE(WaitSeries("chameleon_host_pool_bytes", c, 4096));
  EXPECT_EQ(Series("chameleon_swap_evictions_total", c), 25);
  Publish(client->header(), 6);
  EXPECT_TRUE(WaitSeries("chameleon_swap_evictions_total", c, 30));
}

TEST_F(ExecutorMetricsTest, SlotCountersGrowAcrossClientsAndGaugesResetWhenOneLeaves) {
  StartDaemon();
  const std::string c = "client=\"0\"";
  {
    auto first = Connect();
    ASSERT_NE(first, nullptr);
    Publish(first->header(), 2);
    ASSERT_TRUE(WaitSeries("chameleon_vmm_calls_total", c, 154));
  }
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  EXPECT_TRUE(WaitSeries("chameleon_host_pool_bytes", c, 0));
  EXPECT_TRUE(WaitSeries("chameleon_vmm_calls_last_iteration", c, 0));
  EXPECT_TRUE(WaitSeries("chameleon_device_limit_bytes", c, 0));
  auto second = Connect();  // the same slot; its own counters start at 0
  ASSERT_NE(second, nullptr);
  Publish(second->header(), 1);
  EXPECT_TRUE(WaitSeries("chameleon_vmm_calls_total", c, 231));
  EXPECT_TRUE(WaitSeries("chameleon_swap_fault_ins_total", c, 3));
}

}  // namespace
}  // namespace chameleon::daemon::testing
