// PolicyRunner with two host threads launching at once (label `concurrent`: TSan runs it). The
// shim's ring append is played by a mutex around OccurrenceCounter::Count, the order the daemon
// would drain; the runner takes no lock of its own until a trigger is due. Asserted: each
// after-anchor binds the tensor of the op at that ring position, and each thread's triggers fire
// at their occurrences in every iteration, whatever the interleaving.
#include <barrier>
#include <mutex>
#include <thread>
#include <vector>

#include "sim_fixture.h"
#include "swap/policy_runner.h"

namespace swap_test {
namespace {

using sw::AllocId;
using sw::Residency;

constexpr std::uint32_t kTokenA = 40, kTokenB = 41, kNever = 42;

chameleon::ipc::SwapEntry Entry(std::uint32_t token, std::uint32_t out_occ, std::uint32_t in_occ,
                                std::uint32_t use_occ, std::uint32_t in_token) {
  chameleon::ipc::SwapEntry e{};
  e.bytes = 2 * kMiB;
  e.out_token = token;
  e.out_occurrence = out_occ;
  e.in_token = in_token;
  e.in_occurrence = in_occ;
  e.use_token = in_token;
  e.use_occurrence = use_occ;
  return e;
}

chameleon::ipc::Policy MakePolicy(std::vector<chameleon::ipc::SwapEntry> entries) {
  chameleon::ipc::Policy p;
  p.summary.generation = 1;
  p.entries = std::move(entries);
  return p;
}

class RunnerConcurrentTest : public SwapFixture {
 protected:
  void SetUp() override {
    SwapFixture::SetUp();
    StartEngine();
    runner_ = std::make_unique<sw::PolicyRunner>(engine_.get(), &counters_);
  }
  /// One op of `token` naming `tensor`, as the shim runs it: BeforeOp, the ring append (under
  /// the ring lock; `ring` records the tensor at each position of `token`), AfterOp.
  void Op(std::uint32_t token, AllocId tensor, CUstream stream, std::vector<AllocId>* ring) {
    runner_->BeforeOp(token, stream);
    sw::OccurrenceTicket t;
    {
      std::lock_guard lock(ring_mu_);
      t = runner_->occurrences().Count(token);
      if (ring != nullptr) ring->push_back(tensor);
    }
    const sw::OpTensor args[] = {{tensor, 2 * kMiB}};
    runner_->AfterOp(token, t, stream, args);
  }
  void Boundary() {
    {
      std::lock_guard lock(ring_mu_);
      runner_->occurrences().NextEpoch();
    }
    runner_->BeginIteration();
  }
  std::unique_ptr<sw::PolicyRunner> runner_;
  std::mutex ring_mu_;
};

TEST_F(RunnerConcurrentTest, ShouldSwapOutTheTensorAtTheRingOccurrenceWhenTwoThreadsShareAToken) {
  constexpr int kPerThread = 20;
  std::vector<AllocId> mine[2];
  for (auto& ids : mine) {
    for (int i = 0; i < kPerThread; ++i) {
      CUdeviceptr p = 0;
      AllocId id = 0;
      ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &id));
      ids.push_back(id);
    }
  }
  // Out after occurrences 5, 17 and 33 of the one token both threads launch; their swap-ins are
  // anchored on a token nobody launches, so the swapped-out tensors stay out.
  runner_->SetPolicy(MakePolicy({Entry(kTokenA, 5, 0, 1, kNever), Entry(kTokenA, 17, 0, 1, kNever),
                                 Entry(kTokenA, 33, 0, 1, kNever)}));
  Boundary();
  std::vector<AllocId> ring;
  std::barrier start(2);
  auto launcher = [&](int t) {
    const CUstream stream = t == 0 ? compute_ : other_;
    const bool ctx = ctx_set_current_(ctx_) == CUDA_SUCCESS;  // a CUDA context is per thread
    start.arrive_and_wait();
    if (!ctx) return;  // the ring comes up short
    for (const AllocId id : mine[t]) Op(kTokenA, id, stream, &ring);
  };
  std::thread t0(launcher, 0), t1(launcher, 1);
  t0.join();
  t1.join();
  ASSERT_EQ(ring.size(), 2u * kPerThread);
  for (std::size_t k = 0; k < ring.size(); ++k) {
    const bool out = k == 5 || k == 17 || k == 33;
    EXPECT_EQ(engine_->State(ring[k]), out ? Residency::kSwappedOut : Residency::kResident)
        << "ring occurrence " << k;
  }
  EXPECT_EQ(counters_.swap_out_bytes.load(), 3 * 2 * kMiB);
  EXPECT_EQ(counters_.policy_ignored.load(), 0u);
}

TEST_F(RunnerConcurrentTest, ShouldFireEachThreadsTriggersAtTheirOccurrencesInEveryIteration) {
  AllocId x = 0, y = 0;
  CUdeviceptr p = 0, q = 0;
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &p, &x));
  ASSERT_CU(engine_->Allocate(2 * kMiB, compute_, &q, &y));
  // Thread 0 launches token A with tensor x: out after A#5, in before A#20, used by A#30.
  // Thread 1 launches token B with tensor y: out after B#3, in before B#10, used by B#12.
  runner_->SetPolicy(
      MakePolicy({Entry(kTokenA, 5, 20, 30, kTokenA), Entry(kTokenB, 3, 10, 12, kTokenB)}));
  Boundary();
  constexpr int kOps = 40, kIterations = 3;
  std::barrier iteration(2, [&]() noexcept { Boundary(); });
  int wrong[2] = {0, 0};
  auto launcher = [&](int t) {
    const std::uint32_t token = t == 0 ? kTokenA : kTokenB;
    const AllocId id = t == 0 ? x : y;
    const int out = t == 0 ? 5 : 3, in = t == 0 ? 20 : 10;
    const CUstream stream = t == 0 ? compute_ : other_;
    if (ctx_set_current_(ctx_) != CUDA_SUCCESS) ++wrong[t];  // a CUDA context is per thread
    for (int it = 0; it < kIterations; ++it) {
      for (int k = 0; k < kOps; ++k) {
        Op(token, id, stream, nullptr);
        const Residency want = k >= out && k < in ? Residency::kSwappedOut : Residency::kResident;
        if (engine_->State(id) != want) ++wrong[t];
      }
      iteration.arrive_and_wait();
    }
  };
  std::thread t0(launcher, 0), t1(launcher, 1);
  t0.join();
  t1.join();
  EXPECT_EQ(wrong[0], 0);
  EXPECT_EQ(wrong[1], 0);
  EXPECT_EQ(counters_.swap_out_bytes.load(), 2u * kIterations * 2 * kMiB);
  // Each swap-in is seen in the states above (resident again from its in anchor on); its bytes
  // are not asserted: a swap-in whose chunks were never reused is a reclaim without a copy.
  EXPECT_EQ(counters_.policy_ignored.load(), 0u);
}

}  // namespace
}  // namespace swap_test
