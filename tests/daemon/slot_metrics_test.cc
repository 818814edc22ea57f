// A client's per-slot series after it leaves and when the next client takes its slot, read from
// the daemon's exposition (what /metrics serves): every gauge of an empty slot reads its
// documented idle value (chameleon_client_stage -1, everything else 0), never the departed
// client's last value, and the slot's counters keep growing across clients (docs/metrics.md).
#include <unistd.h>

#include <map>
#include <sstream>

#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

/// The series of slot `slot` in an exposition, by name and extra labels (e.g.
/// `chameleon_swap_bytes_total{direction="out"}`), with whether the family is a gauge.
struct SlotSeries {
  std::map<std::string, double> values;
  std::map<std::string, bool> gauge;
};

SlotSeries ParseSlot(const std::string& text, int slot) {
  SlotSeries out;
  std::map<std::string, bool> gauge_family;
  const std::string label = "client=\"" + std::to_string(slot) + "\"";
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream type(line.substr(7));
      std::string name, kind;
      type >> name >> kind;
      gauge_family[name] = kind == "gauge";
      continue;
    }
    const std::size_t brace = line.find('{');
    const std::size_t close = line.find('}');
    if (line.empty() || line[0] == '#' || brace == std::string::npos || close == std::string::npos)
      continue;
    const std::string family = line.substr(0, brace);
    std::string labels = line.substr(brace + 1, close - brace - 1);
    const std::size_t at = labels.find(label);
    if (at == std::string::npos) continue;
    labels.erase(at, label.size());
    if (!labels.empty() && labels.front() == ',') labels.erase(0, 1);
    if (!labels.empty() && labels.back() == ',') labels.pop_back();
    const std::string key = labels.empty() ? family : family + "{" + labels + "}";
    out.values[key] = std::stod(line.substr(close + 1));
    out.gauge[key] = gauge_family[family];
  }
  return out;
}

class SlotMetricsTest : public DaemonTest {
 protected:
  SlotSeries Slot0() { return ParseSlot(Control({{"command", "metrics"}})["text"], 0); }

  /// Waits until slot 0's `series` reads `value`.
  bool SlotReads(const std::string& series, double value) {
    return WaitFor([&] {
      const SlotSeries s = Slot0();
      const auto it = s.values.find(series);
      return it != s.values.end() && it->second == value;
    });
  }
};

TEST_F(SlotMetricsTest, AnEmptySlotReadsIdleAndTheNextClientStartsFromItsOwnValues) {
  StartDaemon();
  LoopSpec spec;
  auto first = Connect();
  ASSERT_NE(first, nullptr);
  // Everything a gauge can show: a stage past WARMUP, an iteration, device and executor state.
  ipc::SegmentHeader* h = first->header();
  h->device_bytes_live.store(5 << 20);
  h->device_bytes_peak.store(6 << 20);
  h->host_pool_bytes.store(7 << 20);
  h->device_limit_bytes.store(8 << 20);
  h->policy_generation_applied.store(3);
  h->last_iteration_vmm_calls.store(9);
  h->last_iteration_swap_out_bytes.store(10);
  h->last_iteration_swap_in_bytes.store(11);
  h->swap_out_bytes.store(12);
  PushSteps(*first, spec, 0, 14);
  ASSERT_TRUE(WaitFor([&] {
    first->Heartbeat();
    return Describe(first->id())["stage"] != "WARMUP";
  }));
  // Iterations after detection: the ones the detection worker replayed set no iteration gauge.
  PushSteps(*first, spec, 14, 17);
  ASSERT_TRUE(first->Mark(1, 2'000'000, 0));
  ASSERT_TRUE(WaitDrained(*first));
  ASSERT_TRUE(WaitFor([&] {
    first->Heartbeat();
    SlotSeries s = Slot0();
    return s.values["chameleon_client_stage"] >= 1 && s.values["chameleon_iteration_ops"] > 0 &&
           s.values["chameleon_device_bytes_live"] == 5 << 20;
  })) << Control({{"command", "metrics"}})["text"];
  const SlotSeries busy = Slot0();
  EXPECT_EQ(busy.values.at("chameleon_client_pid"), double(getpid()));
  EXPECT_NEAR(busy.values.at("chameleon_iteration_seconds"), 0.002, 1e-9);
  const double ops = Describe(first->id())["records"]["ops"].get<double>();
  ASSERT_GT(ops, 0);
  ASSERT_TRUE(SlotReads("chameleon_ops_total", ops));

  first.reset();  // leaves
  ASSERT_TRUE(WaitFor([&] { return daemon_->clients() == 0; }));
  const SlotSeries idle = Slot0();
  int gauges = 0;
  for (const auto& [series, value] : idle.values) {
    if (!idle.gauge.at(series)) continue;
    ++gauges;
    EXPECT_EQ(value, series == "chameleon_client_stage" ? -1 : 0) << series;
  }
  EXPECT_GE(gauges, 12);  // stage, pid, iteration, device, host pool and executor gauges
  // Counters are the slot's, not the client's: kept, so rate() sees no reset.
  EXPECT_EQ(idle.values.at("chameleon_ops_total"), ops);
  EXPECT_EQ(idle.values.at("chameleon_swap_bytes_total{direction=\"out\"}"), 12);

  auto second = Connect();  // takes slot 0 again
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(SlotReads("chameleon_client_stage", 0));
  EXPECT_TRUE(SlotReads("chameleon_client_pid", double(getpid())));
  const SlotSeries fresh = Slot0();
  for (const auto& [series, value] : fresh.values) {
    if (!fresh.gauge.at(series) || series == "chameleon_client_pid") continue;
    EXPECT_EQ(value, 0) << series << " kept the previous client's value";
  }
  // The newcomer's own counts are added to the slot's.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(second->Launch(16));
  second->header()->swap_out_bytes.store(5);
  ASSERT_TRUE(WaitDrained(*second));
  EXPECT_TRUE(SlotReads("chameleon_ops_total", ops + 10));
  EXPECT_TRUE(SlotReads("chameleon_swap_bytes_total{direction=\"out\"}", 12 + 5));
}

}  // namespace
}  // namespace chameleon::daemon::testing
