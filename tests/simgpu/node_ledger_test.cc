// SIMGPU_NODE: processes of one simulated node share each node device's capacity through one
// ledger file; a SIGKILLed process's bytes come back; a ledger of another node is refused. The
// second process is a fork()ed child, synchronised with pipes (a byte per step, no sleeps).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "node_ledger_layout.h"
#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr std::size_t kMiB = 1u << 20;
constexpr std::size_t kCapacity = 64 * kMiB;
constexpr std::size_t kBig = 48 * kMiB;  // two of them do not fit in one device

/// A pipe the child reports on and one it waits on; the child exits when the parent closes its
/// end (or is killed).
class Child {
 public:
  template <typename Body>
  explicit Child(Body body) {
    int up[2], down[2];
    if (pipe(up) != 0 || pipe(down) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      close(up[0]);
      close(down[1]);
      const std::uint64_t report = body();
      (void)!write(up[1], &report, sizeof report);
      char byte;
      (void)!read(down[0], &byte, 1);  // blocks until the parent closes or kills us
      _exit(0);
    }
    close(up[1]);
    close(down[0]);
    from_ = up[0];
    to_ = down[1];
  }
  ~Child() {
    if (to_ >= 0) close(to_);
    if (pid_ > 0) waitpid(pid_, nullptr, 0);
  }
  /// The child's report once its body has run; ~0 if it died first.
  std::uint64_t Report() {
    std::uint64_t v = ~0ull;
    if (read(from_, &v, sizeof v) != sizeof v) return ~0ull;
    return v;
  }
  void Kill() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int from_ = -1;
  int to_ = -1;
};

class NodeLedgerTest : public SimgpuTest {
 protected:
  void SetUp() override {
    name_ = "ledger-test-" + std::to_string(getpid());
    path_ = "/dev/shm/simgpu-node-" + name_ + "-" + std::to_string(geteuid());
    setenv("SIMGPU_NODE", name_.c_str(), 1);
    setenv("SIMGPU_MEMORY", "64MiB", 1);
  }
  void TearDown() override { unlink(path_.c_str()); }
  static std::uint64_t FreeBytes() {
    size_t free_bytes = 0, total = 0;
    if (cuMemGetInfo(&free_bytes, &total) != CUDA_SUCCESS) return ~0ull;
    return free_bytes;
  }
  // For a child that calls cuInit itself (forked before the parent did): its result or what it
  // could allocate, as one number.
  static std::uint64_t InitAndAllocate(std::size_t bytes) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
      return 1;
    return cuMemAlloc(&p, bytes) == CUDA_SUCCESS ? 0 : 2;
  }
  std::string name_;
  std::string path_;
};

TEST_F(NodeLedgerTest, AnotherProcessTakesTheDevicesMemory) {
  Init();
  Child child([]() -> std::uint64_t {
    CUdeviceptr p;
    return static_cast<std::uint64_t>(cuMemAlloc(&p, kBig));
  });
  ASSERT_EQ(child.Report(), static_cast<std::uint64_t>(CUDA_SUCCESS));
  EXPECT_EQ(FreeBytes(), kCapacity - kBig);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, kBig), CUDA_ERROR_OUT_OF_MEMORY);
  ASSERT_CU(cuMemAlloc(&p, kCapacity - kBig));  // what is left is ours
}

// Two processes allocating 1 MiB at a time as fast as they can, at once: together they get
// exactly the capacity, never more (the CAS against capacity), whatever the interleaving.
TEST_F(NodeLedgerTest, RacingProcessesTogetherGetExactlyTheCapacity) {
  Init();
  const auto allocate_until_full = []() -> std::uint64_t {
    std::uint64_t n = 0;
    for (CUdeviceptr p = 0; cuMemAlloc(&p, kMiB) == CUDA_SUCCESS;) ++n;
    return n;
  };
  Child child(allocate_until_full);
  const std::uint64_t mine = allocate_until_full();
  EXPECT_EQ(mine + child.Report(), kCapacity / kMiB);
  EXPECT_EQ(FreeBytes(), 0u);
}

TEST_F(NodeLedgerTest, AKilledProcessesBytesAreReclaimedByTheNextCharge) {
  Init();
  Child child([]() -> std::uint64_t {
    CUdeviceptr p;
    return static_cast<std::uint64_t>(cuMemAlloc(&p, kBig));
  });
  ASSERT_EQ(child.Report(), static_cast<std::uint64_t>(CUDA_SUCCESS));
  CUdeviceptr p = 0;
  ASSERT_EQ(cuMemAlloc(&p, kBig), CUDA_ERROR_OUT_OF_MEMORY);
  child.Kill();  // SIGKILL: no exit handler runs, the child's slot stays behind
  ASSERT_CU(cuMemAlloc(&p, kBig));
  EXPECT_EQ(FreeBytes(), kCapacity - kBig);
}

TEST_F(NodeLedgerTest, AForkChildsFreeOfInheritedMemoryLeavesItCharged) {
  Init();
  CUdeviceptr inherited = 0;
  ASSERT_CU(cuMemAlloc(&inherited, 16 * kMiB));
  Child child([inherited]() -> std::uint64_t {
    CUdeviceptr p;
    if (cuMemAlloc(&p, 32 * kMiB) != CUDA_SUCCESS) return ~1ull;
    // The parent still holds its 16 MiB: the child's free of its copy gives nothing back.
    if (cuMemFree(inherited) != CUDA_SUCCESS) return ~2ull;
    return FreeBytes();
  });
  EXPECT_EQ(child.Report(), kCapacity - 16 * kMiB - 32 * kMiB);
  EXPECT_EQ(FreeBytes(), kCapacity - 16 * kMiB - 32 * kMiB);
}

TEST_F(NodeLedgerTest, ChunksAndPoolsAreChargedNodeWide) {
  Init();
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CUmemGenericAllocationHandle h = 0;
  ASSERT_CU(cuMemCreate(&h, 16 * kMiB, &prop, 0));
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a = 0;
  ASSERT_CU(cuMemAllocAsync(&a, 16 * kMiB, s));
  ASSERT_CU(cuStreamSynchronize(s));
  Child child([]() -> std::uint64_t { return FreeBytes(); });
  EXPECT_EQ(child.Report(), kCapacity - 32 * kMiB);
  ASSERT_CU(cuMemRelease(h));
  ASSERT_CU(cuMemFreeAsync(a, s));
  ASSERT_CU(cuStreamSynchronize(s));
  Child after([]() -> std::uint64_t { return FreeBytes(); });
  EXPECT_EQ(after.Report(), kCapacity);
}

TEST_F(NodeLedgerTest, AProcessSeeingOnlyDeviceOneTakesDeviceOnesMemory) {
  setenv("SIMGPU_DEVICES", "2", 1);
  // Forked before this process's cuInit, so the child initialises as a process of its own.
  Child child([]() -> std::uint64_t {
    setenv("CUDA_VISIBLE_DEVICES", "1", 1);
    return InitAndAllocate(kBig);
  });
  ASSERT_EQ(child.Report(), 0u);
  Init();
  EXPECT_EQ(FreeBytes(), kCapacity);  // node device 0: untouched
  CUcontext ctx1;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
  ASSERT_CU(cuCtxSetCurrent(ctx1));
  EXPECT_EQ(FreeBytes(), kCapacity - kBig);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, kBig), CUDA_ERROR_OUT_OF_MEMORY);
}

TEST_F(NodeLedgerTest, ALedgerOfAnotherMachineFailsCuInit) {
  Child child([]() -> std::uint64_t {
    setenv("SIMGPU_MEMORY", "32MiB", 1);  // another node shape under the same name
    return InitAndAllocate(kMiB);
  });
  ASSERT_EQ(child.Report(), 0u);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(NodeLedgerTest, AFileThatIsNotALedgerFailsCuInit) {
  std::ofstream(path_) << std::string(sizeof(chameleon::simgpu::LedgerFile), 'x');
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(NodeLedgerTest, ALedgerOfAnotherSizeFailsCuInit) {
  std::ofstream(path_) << std::string(100, '\0');
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(NodeLedgerTest, ALedgerOfAnotherLayoutVersionFailsCuInit) {
  chameleon::simgpu::LedgerFile file{};
  file.header.magic = chameleon::simgpu::kLedgerMagic;
  file.header.version.store(chameleon::simgpu::kLedgerVersion + 1);
  std::ofstream(path_, std::ios::binary).write(reinterpret_cast<const char*>(&file), sizeof file);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(NodeLedgerTest, ABadNodeNameFailsCuInit) {
  setenv("SIMGPU_NODE", "../etc", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace simgpu_test
