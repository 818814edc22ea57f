// Issue 9 end to end on simgpu: a device smaller than the workload's peak, chameleond and the
// workload under the shim. Every run is compared with an unlimited run of the same program:
// the losses and the checksum must be bit-identical, simgpu's physical peak must stay under the
// limit, and the executor must really have swapped.
#include "swap_e2e_fixture.h"

namespace chameleon::daemon::testing {
namespace {

/// Swap traffic between consecutive executor boundaries: one entry per whole iteration (the
/// first boundary closes the stretch before the daemon's boundary reached the shim).
struct IterationSwap {
  std::uint64_t out = 0, in = 0;
};
std::vector<IterationSwap> PerIteration(const std::vector<Boundary>& b) {
  std::vector<IterationSwap> result;
  for (std::size_t i = 1; i < b.size(); ++i) {
    result.push_back({b[i].out_bytes - b[i - 1].out_bytes, b[i].in_bytes - b[i - 1].in_bytes});
  }
  return result;
}

struct Style {
  const char* alloc;
  std::vector<std::string> shape;
  int steps;
  double limit_fraction;  // of the trainer's peak
  bool expect_policy;     // the daemon can plan this limit (else the safety net alone swaps)
  /// simgpu's device as large as the peak, the limit only for the executor. The expandable
  /// style sizes its VA reservations by the device's memory (as PyTorch does): on a device of
  /// the limit's size it could not map past it, whatever the executor does.
  bool device_at_peak = false;
};

/// Names the parameter in test output by its allocation style.
void PrintTo(const Style& style, std::ostream* os) { *os << style.alloc; }

class TrainerStyleTest : public SwapE2ETest, public ::testing::WithParamInterface<Style> {};

TEST_P(TrainerStyleTest, BelowItsPeakTheTrainerMatchesTheUnlimitedRunAndSwapsEveryIteration) {
  const Style& style = GetParam();
  std::vector<std::string> args = style.shape;
  args.insert(args.end(), {"--alloc", style.alloc, "--steps", std::to_string(style.steps)});
  const RunOutput plain = Run("plain", args, PlainEnv());
  const std::uint64_t peak = Number(plain.out, "peak");
  ASSERT_GT(peak, 0u) << plain.out;
  const auto limit = static_cast<std::uint64_t>(double(peak) * style.limit_fraction);
  // GEN_POLICY lasts up to --stage-n iterations; the default 5 can end before the profile's
  // iteration is timed, leaving no candidate (seen on the loaded VM). 8 leaves room for one.
  StartDaemon({"--stage-n", "8"});
  // The loop closed: a policy of the daemon's with swap entries, and its prediction, in force.
  std::uint64_t policy_swaps = 0;
  double predicted_s = 0;
  std::vector<std::string> env = LimitedEnv(limit, "limited");
  for (std::string& e : env) {
    if (style.device_at_peak && e.rfind("SIMGPU_MEMORY=", 0) == 0) {
      e = "SIMGPU_MEMORY=" + std::to_string(peak + (16u << 20));
    }
  }
  const RunOutput limited = RunSampled("limited", args, env, [&](const nlohmann::json& d) {
    const auto& in_force = d["policy"]["in_force"];
    if (in_force["swaps"].is_number() && in_force["swaps"].get<std::uint64_t>() > 0) {
      policy_swaps = in_force["swaps"];
      predicted_s = in_force["predicted_iteration_s"];
    }
  });
  ExpectIdentical(limited, plain);
  EXPECT_LE(HighWater(limited.err), limit) << limited.err;
  RecordProperty("policy_swaps", std::to_string(policy_swaps));
  if (style.expect_policy) {
    EXPECT_GT(policy_swaps, 0u) << "no daemon policy with swaps was applied";
    EXPECT_GT(predicted_s, 0);
  }
  const auto stats = ExecutorStats(StatsFile("limited"));
  ASSERT_FALSE(stats.empty()) << limited.err;
  EXPECT_EQ(stats.at("limit"), limit);
  EXPECT_GT(stats.at("swap_out_bytes"), 0u);
  const auto iterations = PerIteration(Boundaries(StatsFile("limited")));
  ASSERT_GE(iterations.size(), 2u) << "too few iterations closed: " << ShimLog("limited").size();
  for (std::size_t i = 0; i < iterations.size(); ++i) {
    EXPECT_GT(iterations[i].out, 0u) << "iteration " << i << " swapped nothing out";
    EXPECT_GT(iterations[i].in, 0u) << "iteration " << i << " swapped nothing in";
  }
}

// Caching allocator segments are 20 MiB: the limit must hold several, hence a larger model.
INSTANTIATE_TEST_SUITE_P(Styles, TrainerStyleTest,
                         ::testing::Values(Style{"tensor", kSmallTrainer, 16, 0.75, true},
                                           Style{"caching",
                                                 {"--layers", "2", "--hidden", "64", "--seq", "256",
                                                  "--batch", "32", "--seed", "1"},
                                                 8,
                                                 0.45,
                                                 false},
                                           Style{"expandable", kSmallTrainer, 16, 0.75, true,
                                                 /*device_at_peak=*/true}),
                         [](const ::testing::TestParamInfo<Style>& info) {
                           return std::string(info.param.alloc);
                         });

TEST_F(SwapE2ETest, ResNetReplayBelowItsPeakPrintsTheSameIterationsAndChecksum) {
  const std::string trace = CHAMELEON_TRACES_DIR "/resnet_1gpu_et.json.gz";
  ASSERT_TRUE(
      test_support::RequiredFile(trace, "trace (CMake cache variable CHAMELEON_TRACES_DIR)"));
  // Two iterations at 90 % of the 3 GB peak already move ~1.4 GB each way through simgpu (~20 s).
  const std::vector<std::string> args{trace, "--iterations", "2"};
  const RunOutput plain = Run("plain", args, PlainEnv(), replay_);
  const std::uint64_t peak = Number(plain.out, "peak");
  ASSERT_GT(peak, 0u) << plain.out << plain.err;
  const std::uint64_t limit = peak / 10 * 9;
  StartDaemon();
  const RunOutput limited = Run("limited", args, LimitedEnv(limit, "limited"), replay_);
  ExpectIdentical(limited, plain);
  EXPECT_LE(HighWater(limited.err), limit) << limited.err;
  const auto stats = ExecutorStats(StatsFile("limited"));
  ASSERT_FALSE(stats.empty()) << limited.err;
  EXPECT_GT(stats.at("swap_out_bytes"), 0u);
  EXPECT_GT(stats.at("swap_in_bytes"), 0u);
}

// --pointer-table: one gather per step through a device-side table of every weight's address.
// The shim's scans pin the table's targets and report them to the daemon
// (RecordType::kPointerTargets), which remembers them for its candidates (excluding them is
// tested with a fake client in pointer_targets_test.cc: at this limit the generator finds no
// feasible plan — the step's own 32 MiB tensors do not fit — and the run is seconds per step).
TEST_F(SwapE2ETest, PointerTableTargetsReachTheDaemon) {
  // tests/shim's pointer-table configuration: weights of 3-4 MiB are executor allocations (the
  // small trainer's would each pin a whole 2 MiB chunk and not fit), activations dominate the
  // peak, so the pinned weights leave room under a third of it.
  const std::vector<std::string> args = {
      "--layers", "2", "--hidden", "512", "--seq",          "256", "--batch", "16",
      "--seed",   "1", "--steps",  "3",   "--pointer-table"};
  const RunOutput plain = Run("plain", args, PlainEnv());
  const std::uint64_t limit = Number(plain.out, "peak") / 3;
  ASSERT_GT(limit, 0u) << plain.out;
  StartDaemon();
  nlohmann::json last;
  const RunOutput limited = RunSampled("limited", args, LimitedEnv(limit, "limited"),
                                       [&](const nlohmann::json& d) { last = d; });
  ExpectIdentical(limited, plain);
  ASSERT_TRUE(last.is_object()) << "the daemon never described the trainer";
  // The table holds every parameter's address (29 of them here): each reported at least once.
  const auto& targets = last["pointer_targets"];
  EXPECT_GE(targets["reports"].get<int>(), 1) << last.dump(2);
  EXPECT_GE(targets["target_ids"].get<int>(), 29) << last.dump(2);
  EXPECT_EQ(last["records"]["unknown"].get<int>(), 0);
  EXPECT_EQ(last["records"]["dropped"].get<int>(), 0);
}

TEST_F(SwapE2ETest, DynamicTrainerGetsANewPolicyAfterAShiftAndMatchesTheUnlimitedRun) {
  std::vector<std::string> args = kSmallTrainer;
  args.insert(args.end(), {"--steps", "30", "--dynamic", "12"});
  const RunOutput plain = Run("plain", args, PlainEnv());
  ASSERT_FALSE(Shifts(plain.out).empty()) << plain.out;
  const std::uint64_t limit = Number(plain.out, "peak") / 2;
  StartDaemon();
  // The daemon's view while the trainer runs: the generation the shim had applied before the
  // daemon counted its first shift, and the largest one applied after it.
  std::uint64_t before = 0, after = 0;
  bool shifted = false;
  const RunOutput limited =
      RunSampled("limited", args, LimitedEnv(limit, "limited"), [&](const nlohmann::json& d) {
        const std::uint64_t applied = d["policy"]["applied_generation"];
        shifted |= d["shifts"].get<int>() > 0;
        if (shifted) {
          after = std::max(after, applied);
        } else {
          before = applied;
        }
      });
  ExpectIdentical(limited, plain);
  EXPECT_LE(HighWater(limited.err), limit);
  ASSERT_TRUE(shifted) << "the daemon never reported a shift while the trainer ran";
  EXPECT_GT(before, 0u) << "no policy applied before the first shift";
  EXPECT_GT(after, before) << "no new policy generation applied after the shift";
  EXPECT_GT(ExecutorStats(StatsFile("limited"))["swap_out_bytes"], 0u);
}

TEST_F(SwapE2ETest, KilledDaemonDoesNotDisturbTrainingAndANewOneSeesTheShimAgain) {
  std::vector<std::string> args = kSmallTrainer;
  args.insert(args.end(), {"--steps", "40"});
  const RunOutput plain = Run("plain", args, PlainEnv());
  const std::uint64_t limit = Number(plain.out, "peak") / 2;
  StartDaemon();
  const Child child = Start("limited", args, LimitedEnv(limit, "limited"));
  // Mid-run: the first daemon has cut a few iterations (so a boundary reached the shim).
  ASSERT_TRUE(WaitFor(
      [&] {
        const auto d = ClientOf(child.pid);
        return d.is_object() && d["iterations"].get<int>() >= 3;
      },
      60000));
  StopDaemon(SIGKILL);
  int status = 0;
  ASSERT_FALSE(Exited(child, &status)) << "the trainer ended before the daemon was killed";
  StartDaemon();  // same socket path; the dead daemon's socket file is replaced
  // The new daemon sees the shim again, with the executor's counters and limit (chameleonctl
  // client's view) carried over: they live in the process, not in the segment.
  nlohmann::json seen;
  EXPECT_TRUE(WaitFor(
      [&] {
        seen = ClientOf(child.pid);
        return seen.is_object() && seen["swap"]["out_bytes"].get<std::uint64_t>() > 0;
      },
      30000))
      << "the shim did not reconnect to the new daemon: " << seen.dump();
  if (seen.is_object()) {
    EXPECT_EQ(seen["device"]["limit_bytes"], limit) << seen.dump();
  }
  ExpectIdentical(Finish(child), plain);
}

}  // namespace
}  // namespace chameleon::daemon::testing
