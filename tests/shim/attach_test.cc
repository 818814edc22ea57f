// The first connection to a daemon that is slow to answer (a loaded machine): the shim keeps
// the records issued meanwhile and delivers them, exactly and in order, once the handshake
// completes (docs/shim.md, "Records before attach"). The shim is loaded in-process over the null
// driver (shim/testing/null_driver.cc) and the test plays the daemon (FakeDaemon), holding its
// answer for as long as it likes: no timing assumption. Each TEST runs in its own process.
#include <cuda.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "chameleon/shim/shim_api.h"
#include "fake_daemon.h"
#include "support/wait_for.h"

namespace {

using chameleon::test_support::WaitFor;  // cross-thread state of the shim's client

using chameleon::ipc::RecordType;
using chameleon::shim::testing::FakeDaemon;
using chameleon::shim::testing::Record;

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);
using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

struct Shim {
  AllocFn alloc = nullptr;
  FreeFn free = nullptr;
  LaunchFn launch = nullptr;
  ChameleonShimGetStatsFn stats = nullptr;

  ChameleonShimStats Stats() const {
    ChameleonShimStats s{};
    stats(&s, sizeof(s));
    return s;
  }
  /// A launch of the null driver's 4-argument kernel naming `p0` and `p1`.
  CUresult Launch(CUdeviceptr p0, CUdeviceptr p1) const {
    int n = 16;
    float alpha = 1.0f;
    void* params[] = {&p0, &p1, &n, &alpha};
    return launch(reinterpret_cast<CUfunction>(0x1000), 1, 1, 1, 32, 1, 1, 0, nullptr, params,
                  nullptr);
  }
};

class AttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = "/tmp/chameleon_attach_test_" + std::to_string(::getpid()) + ".sock";
    daemon_.HoldHandshakes(true);
    ASSERT_TRUE(daemon_.Start(socket_));
    setenv("CHAMELEON_SOCKET", socket_.c_str(), 1);
    setenv("CHAMELEON_REAL_LIBCUDA", CHAMELEON_NULL_DRIVER, 1);
    // The default: the held daemon answers much later than this.
    setenv("CHAMELEON_CONNECT_TIMEOUT_MS", "5", 1);
    setenv("CHAMELEON_RETRY_MS", "20", 1);
    setenv("CHAMELEON_LOG_LEVEL", "error", 1);
  }
  void TearDown() override { daemon_.Stop(); }

  /// Loads the shim (after the test's own environment changes).
  bool Load() {
    void* handle = dlopen(CHAMELEON_SHIM_PATH, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) return false;
    shim_.alloc = reinterpret_cast<AllocFn>(dlsym(handle, "cuMemAlloc_v2"));
    shim_.free = reinterpret_cast<FreeFn>(dlsym(handle, "cuMemFree_v2"));
    shim_.launch = reinterpret_cast<LaunchFn>(dlsym(handle, "cuLaunchKernel"));
    shim_.stats =
        reinterpret_cast<ChameleonShimGetStatsFn>(dlsym(handle, "chameleon_shim_get_stats"));
    return shim_.alloc && shim_.free && shim_.launch && shim_.stats;
  }

  /// Releases the daemon and returns what the shim's (single) connection delivered.
  std::vector<Record> ReleaseAndDrain() {
    daemon_.HoldHandshakes(false);
    EXPECT_TRUE(daemon_.WaitForClients(1, 10000));
    EXPECT_TRUE(WaitFor([&] { return shim_.Stats().connected == 1; }));
    if (daemon_.client_count() == 0) return {};
    return daemon_.client(0)->Drain();
  }

  std::string socket_;
  FakeDaemon daemon_;
  Shim shim_;
};

std::vector<std::uint64_t> AllocIds(const std::vector<Record>& records) {
  std::vector<std::uint64_t> ids;
  for (const Record& r : records) {
    if (r.type == RecordType::kAlloc) ids.push_back(r.As<chameleon::ipc::AllocRecord>().id);
  }
  return ids;
}

TEST_F(AttachTest, OpsIssuedBeforeTheDaemonAnswersAreDeliveredExactlyAndInOrder) {
  ASSERT_TRUE(Load());
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  // The first tracked call connects; the daemon holds its answer, so the call goes on without it.
  ASSERT_EQ(shim_.alloc(&a, 64 << 20), CUDA_SUCCESS);
  ASSERT_EQ(shim_.alloc(&b, 64 << 20), CUDA_SUCCESS);
  EXPECT_EQ(shim_.Stats().connected, 0u);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(shim_.Launch(a + 64, b + 128), CUDA_SUCCESS);
  ASSERT_EQ(shim_.free(b), CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(shim_.Launch(a, a + 4096), CUDA_SUCCESS);

  const std::vector<Record> records = ReleaseAndDrain();
  // Exactly the program's calls, in its order: 2 allocations, 100 launches of (a, b), the free
  // of b, 10 launches of a alone.
  ASSERT_EQ(records.size(), 2u + 100u + 1u + 10u);
  const std::vector<std::uint64_t> ids = AllocIds(records);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(records[0].As<chameleon::ipc::AllocRecord>().address, a);
  EXPECT_EQ(records[1].As<chameleon::ipc::AllocRecord>().address, b);
  for (std::size_t i = 2; i < 102; ++i) {
    ASSERT_EQ(records[i].type, RecordType::kLaunch) << i;
    EXPECT_EQ(records[i].Tensors(), (std::vector<std::uint64_t>{ids[0], ids[1]})) << i;
  }
  ASSERT_EQ(records[102].type, RecordType::kFree);
  EXPECT_EQ(records[102].As<chameleon::ipc::FreeRecord>().id, ids[1]);
  for (std::size_t i = 103; i < records.size(); ++i) {
    ASSERT_EQ(records[i].type, RecordType::kLaunch) << i;
    EXPECT_EQ(records[i].Tensors(), std::vector<std::uint64_t>{ids[0]}) << i;
  }
  // One connection, kept: the daemon never saw a half-open one reset (its "socket error").
  EXPECT_EQ(daemon_.accepted(), 1u);
  const ChameleonShimStats st = shim_.Stats();
  EXPECT_EQ(st.connects, 1u);
  EXPECT_EQ(st.records_dropped, 0u);
  // And records keep flowing through the ring after the attach.
  ASSERT_EQ(shim_.Launch(a, 0), CUDA_SUCCESS);
  const std::vector<Record> later = daemon_.client(0)->Drain();
  ASSERT_EQ(later.size(), 1u);
  EXPECT_EQ(later[0].type, RecordType::kLaunch);
}

TEST_F(AttachTest, ADaemonThatAnswersSecondsLateStillGetsEveryStagedOp) {
  ASSERT_TRUE(Load());
  CUdeviceptr a = 0;
  ASSERT_EQ(shim_.alloc(&a, 64 << 20), CUDA_SUCCESS);
  for (int i = 0; i < 5; ++i) ASSERT_EQ(shim_.Launch(a, a), CUDA_SUCCESS);
  // The slow daemon is the input here, not a synchronisation: CI's loaded machine answered the
  // first handshake more than a second late, and a 1 s budget lost the program's first ops.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::vector<Record> records = ReleaseAndDrain();
  ASSERT_EQ(records.size(), 1u + 5u);
  EXPECT_EQ(records[0].type, RecordType::kAlloc);
  for (std::size_t i = 1; i < records.size(); ++i) EXPECT_EQ(records[i].type, RecordType::kLaunch);
  const ChameleonShimStats st = shim_.Stats();
  EXPECT_EQ(st.connects, 1u);
  EXPECT_EQ(st.records_dropped, 0u);
  EXPECT_EQ(daemon_.accepted(), 1u);
}

TEST_F(AttachTest, LaunchesRacingTheCopyOfTheStagedRecordsWaitInsteadOfBeingDropped) {
  // Room for everything without a drain: a 64 MiB ring stages 32 MiB.
  setenv("CHAMELEON_RING_BYTES", "67108864", 1);
  ASSERT_TRUE(Load());
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  ASSERT_EQ(shim_.alloc(&a, 64 << 20), CUDA_SUCCESS);
  ASSERT_EQ(shim_.alloc(&b, 64 << 20), CUDA_SUCCESS);
  // Enough staged records that copying them into the ring holds the producer lock for far
  // longer than an op's bounded spin.
  constexpr int kStaged = 30000;
  for (int i = 0; i < kStaged; ++i) ASSERT_EQ(shim_.Launch(a, b), CUDA_SUCCESS);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> racing{0};
  std::thread launcher([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      if (shim_.Launch(a, b) != CUDA_SUCCESS) break;
      racing.fetch_add(1, std::memory_order_relaxed);
    }
  });
  daemon_.HoldHandshakes(false);
  const bool attached =
      daemon_.WaitForClients(1, 10000) && WaitFor([&] { return shim_.Stats().connected == 1; });
  // Keep launching a little past the attach, then stop.
  const std::uint64_t at_attach = racing.load();
  WaitFor([&] { return racing.load() > at_attach + 100; });
  stop.store(true);
  launcher.join();
  ASSERT_TRUE(attached);

  std::uint64_t launches = 0;
  for (const Record& r : daemon_.client(0)->Drain()) launches += r.type == RecordType::kLaunch;
  EXPECT_EQ(shim_.Stats().records_dropped, 0u);
  EXPECT_EQ(launches, kStaged + racing.load());
}

TEST_F(AttachTest, AFullStagingBufferFallsBackToAnnouncingTheLiveAllocations) {
  // The smallest ring: half of it (2 KiB) stages about 40 launches.
  setenv("CHAMELEON_RING_BYTES", "4096", 1);
  ASSERT_TRUE(Load());
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  ASSERT_EQ(shim_.alloc(&a, 64 << 20), CUDA_SUCCESS);
  ASSERT_EQ(shim_.alloc(&b, 64 << 20), CUDA_SUCCESS);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(shim_.Launch(a, b), CUDA_SUCCESS);
  ASSERT_EQ(shim_.free(a), CUDA_SUCCESS);

  const std::vector<Record> records = ReleaseAndDrain();
  // The partial stream is dropped whole (counted); the daemon learns what is live instead.
  EXPECT_GT(shim_.Stats().records_dropped, 0u);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_EQ(records[0].type, RecordType::kAlloc);
  EXPECT_EQ(records[0].As<chameleon::ipc::AllocRecord>().address, b);
  EXPECT_EQ(daemon_.accepted(), 1u);
}

TEST_F(AttachTest, WithoutADaemonNothingIsStagedAndLaunchesAreNotRecorded) {
  daemon_.Stop();  // no socket: the first connection fails at once
  ASSERT_TRUE(Load());
  CUdeviceptr a = 0;
  ASSERT_EQ(shim_.alloc(&a, 64 << 20), CUDA_SUCCESS);
  for (int i = 0; i < 10; ++i) ASSERT_EQ(shim_.Launch(a, a), CUDA_SUCCESS);
  const ChameleonShimStats st = shim_.Stats();
  EXPECT_EQ(st.connected, 0u);
  EXPECT_EQ(st.records_written, 0u);
  EXPECT_EQ(st.records_dropped, 0u);  // nothing was staged, so nothing was lost either
}

}  // namespace
