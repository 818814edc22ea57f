// PolicyRunner on simgpu: triggers fire at (token, occurrence) anchors, inserted ops do not move
// them, entries bind to the out-anchor op's tensor by position and size, unmatched or freed
// entries are ignored, wrapping entries keep their binding across the boundary, generations
// change only at iteration boundaries.
#include <span>

#include "sim_fixture.h"
#include "swap/policy_runner.h"

namespace swap_test {
namespace {

using sw::AllocId;
using sw::Residency;

std::uint64_t C(const std::atomic<std::uint64_t>& c) { return c.load(); }

constexpr std::uint32_t kFwd = 10, kBwd = 20, kNoise = 30;

chameleon::ipc::SwapEntry Entry(std::uint64_t bytes, std::uint32_t out_occ, std::uint32_t in_occ,
                                std::uint32_t use_occ, std::uint16_t out_arg = 0) {
  chameleon::ipc::SwapEntry e{};
  e.bytes = bytes;
  e.out_arg = out_arg;
  e.out_token = kFwd;
  e.out_occurrence = out_occ;
  e.in_token = kBwd;
  e.in_occurrence = in_occ;
  e.use_token = kBwd;
  e.use_occurrence = use_occ;
  return e;
}

// Out after bwd#0 (the last use of the iteration); in before fwd#0 and use at fwd#1 of the NEXT
// iteration.
chameleon::ipc::SwapEntry WrappingEntry() {
  chameleon::ipc::SwapEntry e = Entry(2 * kMiB, 0, 0, 1);
  e.out_token = kBwd;
  e.in_token = kFwd;
  e.use_token = kFwd;
  e.entry_flags = chameleon::ipc::kEntryWraps;
  return e;
}

chameleon::ipc::Policy MakePolicy(std::uint64_t generation,
                                  std::vector<chameleon::ipc::SwapEntry> entries) {
  chameleon::ipc::Policy p;
  p.summary.generation = generation;
  p.entries = std::move(entries);
  return p;
}

class RunnerTest : public SwapFixture {
 protected:
  void SetUp() override {
    SwapFixture::SetUp();
    StartEngine();
    runner_ = std::make_unique<sw::PolicyRunner>(engine_.get(), &counters_);
  }
  /// One op whose only tensor argument is `watch` (2 MiB): BeforeOp, (nothing to launch),
  /// AfterOp; returns the tensor's state after it.
  Residency Op(std::uint32_t token, AllocId watch) {
    const sw::OpTensor args[] = {{watch, 2 * kMiB}};
    return Op(token, watch, args);
  }
  Residency Op(std::uint32_t token, AllocId watch, std::span<const sw::OpTensor> args) {
    const sw::OccurrenceTicket occ = Before(token);
    runner_->AfterOp(token, occ, compute_, args);
    return engine_->State(watch);
  }
  /// Two 2 MiB tensors on the device.
  void AllocateTwo(AllocId* a, AllocId* b) {
    CUdeviceptr p = 0, q = 0;
    ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, a));
    ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &q, b));
  }
  /// BeforeOp, then the op's ring append (the telemetry's part in the shim): its ticket.
  sw::OccurrenceTicket Before(std::uint32_t token) {
    runner_->BeforeOp(token, compute_);
    return runner_->occurrences().Count(token);
  }
  /// An iteration boundary: the ring's (the telemetry's part), then the runner's.
  void Boundary() {
    runner_->occurrences().NextEpoch();
    runner_->BeginIteration();
  }
  std::unique_ptr<sw::PolicyRunner> runner_;
};

TEST_F(RunnerTest, TriggersFireAtTheirAnchors) {
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, 1, 0, 1)}));
  Boundary();
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);    // fwd#0
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);  // fwd#1: last use -> out
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);  // fwd#2
  EXPECT_EQ(Op(kBwd, id), Residency::kResident);    // bwd#0: swap-in starts before it
  EXPECT_EQ(C(counters_.prefetch_hits) + C(counters_.prefetch_misses), 0u);
  EXPECT_EQ(Op(kBwd, id), Residency::kResident);  // bwd#1: the consumer waits
  EXPECT_EQ(counters_.prefetch_hits.load() + counters_.prefetch_misses.load(), 1u);
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
}

// The after-check is a bitmap over each token's after-anchor range: anchors in different 64-bit
// words fire, the ops between them (inside the range) and past the last do not.
TEST_F(RunnerTest, ShouldSwapOutExactlyAtAfterAnchorsThatSpanSeveralBitmapWords) {
  AllocId ids[3] = {};
  for (AllocId& id : ids) {
    CUdeviceptr p = 0;
    ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  }
  const std::uint32_t outs[3] = {3, 64, 200};  // words 0, 0 and 3 of the span from 3
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, outs[0], 0, 0), Entry(2 * kMiB, outs[1], 0, 0),
                                    Entry(2 * kMiB, outs[2], 0, 0)}));
  Boundary();
  std::vector<std::uint32_t> swapped_at[3];
  for (std::uint32_t occurrence = 0; occurrence < 260; ++occurrence) {
    const std::uint32_t k = occurrence < outs[0] ? 0 : occurrence <= outs[1] ? 1 : 2;
    const AllocId watch = ids[occurrence <= outs[0] ? 0 : k];
    const sw::OpTensor args[] = {{watch, 2 * kMiB}};
    const bool was_out = engine_->State(watch) == Residency::kSwappedOut;
    if (Op(kFwd, watch, args) == Residency::kSwappedOut && !was_out) {
      swapped_at[occurrence <= outs[0] ? 0 : k].push_back(occurrence);
    }
  }
  EXPECT_EQ(swapped_at[0], std::vector<std::uint32_t>{outs[0]});
  EXPECT_EQ(swapped_at[1], std::vector<std::uint32_t>{outs[1]});
  EXPECT_EQ(swapped_at[2], std::vector<std::uint32_t>{outs[2]});
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
}

// After-anchors too far apart for the bitmap budget (the daemon's input is untrusted: a span of
// 2^31 occurrences would be 256 MiB of bits) are searched in the sorted list instead, and still
// fire exactly where they are.
TEST_F(RunnerTest, ShouldFireAfterAnchorsTooFarApartForABitmap) {
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, 2, 0, 0), Entry(2 * kMiB, 1u << 31, 0, 0)}));
  Boundary();
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);    // fwd#0
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);    // fwd#1
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);  // fwd#2: the first entry's out anchor
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
}

TEST_F(RunnerTest, InsertedOpsDoNotShiftTheTriggers) {
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, 1, 0, 1)}));
  Boundary();
  EXPECT_EQ(Op(kNoise, id), Residency::kResident);
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);
  EXPECT_EQ(Op(kNoise, id), Residency::kResident);
  EXPECT_EQ(Op(kNoise, id), Residency::kResident);
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);
  EXPECT_EQ(Op(kNoise, id), Residency::kSwappedOut);
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);
  EXPECT_EQ(Op(kNoise, id), Residency::kSwappedOut);
  EXPECT_EQ(Op(kBwd, id), Residency::kResident);
  // The next iteration counts occurrences afresh.
  Boundary();
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);
}

TEST_F(RunnerTest, AnEntryThatMatchesNothingIsIgnored) {
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  // No tensor of the out-anchor op has the planned size (nor does the one at out_arg).
  runner_->SetPolicy(MakePolicy(1, {Entry(3 * kMiB, 0, 0, 1)}));
  Boundary();
  for (std::uint32_t t : {kFwd, kFwd, kBwd, kBwd}) EXPECT_EQ(Op(t, id), Residency::kResident);
  EXPECT_EQ(C(counters_.policy_ignored), 1u);  // once per entry and iteration, not per trigger
  // A tensor that is not the executor's (id 0: passed through) is never a target either.
  Boundary();
  const sw::OpTensor passthrough[] = {{0, 3 * kMiB}};
  EXPECT_EQ(Op(kFwd, id, passthrough), Residency::kResident);
  EXPECT_EQ(C(counters_.policy_ignored), 2u);
}

TEST_F(RunnerTest, AnEntryBindsTheTensorAtItsArgumentOrTheFirstOfItsSize) {
  CUdeviceptr p = 0, q = 0, r = 0;
  AllocId small = 0, a = 0, b = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &small));
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &q, &a));
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &r, &b));
  const sw::OpTensor args[] = {{small, 2 * kMiB}, {a, 4 * kMiB}, {b, 4 * kMiB}};
  // out_arg 2 names b exactly.
  runner_->SetPolicy(MakePolicy(1, {Entry(4 * kMiB, 0, 0, 1, 2)}));
  Boundary();
  EXPECT_EQ(Op(kFwd, b, args), Residency::kSwappedOut);
  EXPECT_EQ(engine_->State(a), Residency::kResident);
  EXPECT_EQ(engine_->State(small), Residency::kResident);
  EXPECT_EQ(Op(kBwd, b, args), Residency::kResident);
  // out_arg 0 has the wrong size: the first 4 MiB tensor (a) is taken instead.
  runner_->SetPolicy(MakePolicy(2, {Entry(4 * kMiB, 0, 0, 1, 0)}));
  Boundary();
  EXPECT_EQ(Op(kFwd, a, args), Residency::kSwappedOut);
  EXPECT_EQ(engine_->State(b), Residency::kResident);
  EXPECT_EQ(engine_->State(small), Residency::kResident);
  EXPECT_EQ(Op(kBwd, a, args), Residency::kResident);
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
}

TEST_F(RunnerTest, AWrappingEntryKeepsItsBindingAcrossTheBoundary) {
  CUdeviceptr p = 0, q = 0;
  AllocId id = 0, other = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &q, &other));
  runner_->SetPolicy(MakePolicy(1, {WrappingEntry()}));
  Boundary();
  // First iteration: nothing is bound yet, so fwd#0 / fwd#1 do nothing (and count nothing).
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);
  Boundary();
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);  // still out over the boundary
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);       // fwd#0 starts the swap-in of `id`
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);  // fwd#1 waits for it
  EXPECT_EQ(C(counters_.prefetch_hits) + C(counters_.prefetch_misses), 1u);
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);  // and out again
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
  // A new generation without the entry: the tensor left out is brought back at the switch.
  runner_->SetPolicy(MakePolicy(2, {}));
  Boundary();
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  ASSERT_CU(ctx_sync_());
}

TEST_F(RunnerTest, ANewGenerationSwappingTheSameTensorOverTheBoundaryTakesItOverWhereItIs) {
  AllocId id = 0, other = 0;
  AllocateTwo(&id, &other);
  const chameleon::ipc::SwapEntry e = WrappingEntry();
  runner_->SetPolicy(MakePolicy(1, {e}));
  Boundary();
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);
  // The next candidate swaps the same tensor over the boundary, with its swap-in one op later,
  // and adds an entry of its own first (the entries' order differs).
  chameleon::ipc::SwapEntry later = e;
  later.in_occurrence = 1;
  later.use_occurrence = 2;
  chameleon::ipc::SwapEntry unrelated = Entry(2 * kMiB, 5, 5, 6);
  runner_->SetPolicy(MakePolicy(2, {unrelated, later}));
  Boundary();
  // Not brought back at the switch: the new generation's trigger does it.
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.carried_bindings), 1u);
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);   // fwd#0 (not a use): generation 1's trigger
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);  // fwd#1 starts the swap-in
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);  // fwd#2 waits for it
  EXPECT_EQ(C(counters_.fault_ins), 0u);
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
  // A generation whose entry differs in size is another tensor: brought back at the switch.
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);
  chameleon::ipc::SwapEntry bigger = later;
  bigger.bytes = 4 * kMiB;
  runner_->SetPolicy(MakePolicy(3, {bigger}));
  Boundary();
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(C(counters_.carried_bindings), 1u);
  ASSERT_CU(ctx_sync_());
}

// Two op sequences' plans name one tensor by different anchors (the daemon plans each sequence
// on its own). When a plan comes back, the tensor its entry bound when last in force, held out
// now by the plan it replaces, is taken over where it is instead of brought back at the switch.
TEST_F(RunnerTest, APlanThatComesBackTakesOverTheTensorsItHadOutWhenLastInForce) {
  AllocId id = 0, other = 0;
  AllocateTwo(&id, &other);
  // Plan A swaps `id` out after bwd#0; plan B, of a sequence with one more bwd op first, after
  // bwd#1 (another out anchor: nothing to carry by anchors).
  const chameleon::ipc::SwapEntry a = WrappingEntry();
  chameleon::ipc::SwapEntry b = a;
  b.out_occurrence = 1;
  runner_->SetPolicy(MakePolicy(1, {a}));
  Boundary();
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);  // A binds `id`
  runner_->SetPolicy(MakePolicy(2, {b}));
  Boundary();
  EXPECT_EQ(engine_->State(id), Residency::kResident);  // B never ran: brought back at the switch
  EXPECT_EQ(C(counters_.carried_bindings), 0u);
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);
  EXPECT_EQ(Op(kBwd, other), Residency::kResident);
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);  // B binds `id`
  // A again (recalled: a new generation, the same entry), then B again: each takes `id` over.
  runner_->SetPolicy(MakePolicy(3, {a}));
  Boundary();
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.carried_bindings), 1u);
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);  // fwd#0: A's trigger brings it back
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);
  runner_->SetPolicy(MakePolicy(4, {b}));
  Boundary();
  EXPECT_EQ(engine_->State(id), Residency::kSwappedOut);
  EXPECT_EQ(C(counters_.carried_bindings), 2u);
  EXPECT_EQ(Op(kFwd, other), Residency::kResident);  // fwd#0: B's trigger brings it back
  EXPECT_EQ(engine_->State(id), Residency::kResident);
  EXPECT_EQ(C(counters_.fault_ins), 0u);
  EXPECT_EQ(C(counters_.policy_ignored), 0u);
  ASSERT_CU(ctx_sync_());
}

TEST_F(RunnerTest, AnEntryNamingAFreedTensorIsIgnored) {
  CUdeviceptr p = 0, q = 0;
  AllocId id = 0, live = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &q, &live));
  ASSERT_CU(engine_->Free(id, compute_));
  // The op still names the freed tensor (a stale id): its entry is ignored, never a fault.
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, 0, 0, 1, 0), Entry(2 * kMiB, 0, 0, 1, 1)}));
  Boundary();
  const sw::OpTensor args[] = {{id, 2 * kMiB}, {live, 2 * kMiB}};
  EXPECT_EQ(Op(kFwd, live, args), Residency::kSwappedOut);  // the live entry still works
  EXPECT_EQ(Op(kBwd, live), Residency::kResident);
  EXPECT_EQ(Op(kBwd, live), Residency::kResident);
  EXPECT_EQ(C(counters_.policy_ignored), 1u);
  ASSERT_CU(ctx_sync_());
}

// A tensor pinned after the plan was made (a pointer-table target found by a later scan) cannot
// leave: its entry is counted as ignored in every iteration, and nothing else of it runs.
TEST_F(RunnerTest, AnEntryWhoseTensorIsPinnedIsIgnoredEveryIteration) {
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  engine_->SetPinned(id, true);
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, 0, 0, 1)}));
  for (std::uint64_t iteration = 1; iteration <= 2; ++iteration) {
    Boundary();
    for (std::uint32_t t : {kFwd, kFwd, kBwd, kBwd}) EXPECT_EQ(Op(t, id), Residency::kResident);
    EXPECT_EQ(C(counters_.policy_ignored), iteration);
  }
  EXPECT_EQ(C(counters_.prefetch_hits) + C(counters_.prefetch_misses), 0u);
  ASSERT_CU(ctx_sync_());
}

TEST_F(RunnerTest, ANewGenerationTakesEffectOnlyAtTheBoundary) {
  CUdeviceptr p = 0;
  AllocId id = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
  runner_->SetPolicy(MakePolicy(1, {Entry(2 * kMiB, 1, 0, 1)}));
  Boundary();
  EXPECT_EQ(runner_->generation(), 1u);
  EXPECT_EQ(Op(kFwd, id), Residency::kResident);
  chameleon::ipc::Policy second = MakePolicy(2, {Entry(2 * kMiB, 0, 1, 2)});  // fires at fwd#0
  second.summary.predicted_stall_s = 0.5;
  second.summary.predicted_in_wait_s = 0.25;
  runner_->SetPolicy(second);
  EXPECT_EQ(runner_->generation(), 1u);
  EXPECT_EQ(C(counters_.predicted_in_wait_ns), 0u);  // generation 1 predicted nothing
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);   // still generation 1's anchor
  EXPECT_EQ(Op(kBwd, id), Residency::kResident);
  Boundary();
  EXPECT_EQ(runner_->generation(), 2u);
  EXPECT_EQ(C(counters_.policy_generation), 2u);
  // Its summary's predictions are the gauges from the boundary that installs it.
  EXPECT_EQ(C(counters_.predicted_stall_ns), 500'000'000u);
  EXPECT_EQ(C(counters_.predicted_in_wait_ns), 250'000'000u);
  EXPECT_EQ(Op(kFwd, id), Residency::kSwappedOut);  // generation 2: out after fwd#0
  EXPECT_EQ(Op(kBwd, id), Residency::kSwappedOut);  // in before bwd#1 now
  EXPECT_EQ(Op(kBwd, id), Residency::kResident);
}

TEST_F(RunnerTest, DataSurvivesPolicyDrivenSwappingAcrossIterations) {
  CUdeviceptr a = 0;
  AllocId ida = 0;
  ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &a, &ida));
  runner_->SetPolicy(MakePolicy(1, {Entry(4 * kMiB, 0, 0, 1)}));
  for (int it = 0; it < 3; ++it) {
    Boundary();
    // fwd#0 produces A; A goes out after it.
    sw::OccurrenceTicket occ = Before(kFwd);
    ASSERT_CU(Fill(a, 4 * kMiB, 100 + it, compute_));
    const sw::OpTensor args[] = {{ida, 4 * kMiB}};
    runner_->AfterOp(kFwd, occ, compute_, args);
    // fwd#1: a temporary takes A's chunks and scribbles on them.
    occ = Before(kFwd);
    CUdeviceptr t = 0;
    AllocId idt = 0;
    ASSERT_CU(engine_->Allocate(4 * kMiB, compute_, &t, &idt));
    ASSERT_CU(Fill(t, 4 * kMiB, 7, compute_));
    ASSERT_CU(engine_->Free(idt, compute_));
    runner_->AfterOp(kFwd, occ, compute_, {});
    // bwd#0 prefetches, bwd#1 consumes A on the compute stream.
    occ = Before(kBwd);
    runner_->AfterOp(kBwd, occ, compute_, args);
    occ = Before(kBwd);
    ASSERT_CU(Check(a, 4 * kMiB, 100 + it, compute_, it));
    runner_->AfterOp(kBwd, occ, compute_, args);
    ASSERT_CU(ctx_sync_());  // the loss.item() of a training step
    EXPECT_EQ(results_[it], 0u) << "iteration " << it;
  }
  EXPECT_EQ(C(counters_.swap_out_bytes), 3 * 4 * kMiB);
  EXPECT_EQ(C(counters_.swap_in_bytes), 3 * 4 * kMiB);
}

}  // namespace
}  // namespace swap_test
