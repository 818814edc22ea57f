// Sparse simulated memory through the driver API (docs/simgpu.md, "Memory model"): copies keep
// every written byte and read zeros elsewhere, never-written memory costs no host RAM however
// often it is copied, zero memsets give pages back, and the test-only copy fault hooks drop, or
// delay past their consumers, exactly the 2 MiB they name.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr std::size_t kMiB = 1u << 20;
constexpr std::size_t kGiB = 1ull << 30;

/// Pages of [p, p + n) that are mapped in this process (mincore), counted before anything reads
/// them: a read would map the zero page and count.
std::size_t ResidentPages(std::uintptr_t p, std::size_t n) {
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  const std::uintptr_t first = p / page * page;
  const std::size_t pages = (p + n - first + page - 1) / page;
  std::vector<unsigned char> vec(pages);
  if (mincore(reinterpret_cast<void*>(first), pages * page, vec.data()) != 0) return SIZE_MAX;
  std::size_t resident = 0;
  for (unsigned char v : vec) resident += v & 1;
  return resident;
}

/// Sparse content: byte `i` of every 1 MiB + 1 (so it lands at ever-changing page offsets) is
/// set to a value derived from its index; everything else is zero.
constexpr std::size_t kStride = kMiB + 1;
unsigned char ValueAt(std::size_t i) { return static_cast<unsigned char>(i / kStride % 251 + 1); }

/// Writes the sparse content into device memory [p, p + n) with small H2D copies.
void WriteSparse(CUdeviceptr p, std::size_t n) {
  for (std::size_t i = 0; i < n; i += kStride) {
    const unsigned char v = ValueAt(i);
    ASSERT_CU(cuMemcpyHtoD(p + i, &v, 1));
  }
}

/// Index of the first byte of `host` (n bytes) that differs from the sparse content, or n.
std::size_t FirstMismatch(const unsigned char* host, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char want = i % kStride == 0 ? ValueAt(i) : 0;
    if (host[i] != want) return i;
  }
  return n;
}

class SparseCopyTest : public SimgpuTest {};

TEST_F(SparseCopyTest, ShouldKeepWrittenBytesAndZeroTheRestAcrossEveryCopyKind) {
  Init();
  const std::size_t n = 24 * kMiB + 777;  // unaligned length, unaligned offsets below
  CUdeviceptr a = 0, b = 0;
  ASSERT_CU(cuMemAlloc(&a, n + 4096));
  ASSERT_CU(cuMemAlloc(&b, n + 4096));
  WriteSparse(a + 100, n);
  // b holds stale data everywhere: the copy must turn it into zeros where a was never written.
  ASSERT_CU(cuMemsetD8(b, 0xAB, n + 4096));
  ASSERT_CU(cuMemcpyDtoD(b + 3000, a + 100, n));  // D2D, different page offsets
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, n + 4096, 0));
  std::memset(pinned, 0xCD, n + 4096);
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, 0));
  auto* h = static_cast<unsigned char*>(pinned) + 5;
  ASSERT_CU(cuMemcpyDtoHAsync(h, b + 3000, n, s));  // D2H async into pinned memory
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(FirstMismatch(h, n), n);
  CUdeviceptr c = 0;
  ASSERT_CU(cuMemAlloc(&c, n));
  ASSERT_CU(cuMemsetD32(c, 0x01010101u, n / 4));
  ASSERT_CU(cuMemcpyHtoD(c, h, n));  // H2D from pinned memory
  std::vector<unsigned char> back(n, 0xEE);
  ASSERT_CU(cuMemcpyDtoH(back.data(), c, n));  // D2H into pageable memory
  EXPECT_EQ(FirstMismatch(back.data(), n), n);
  ASSERT_CU(cuMemsetD8(c + 4096, 0, n - 8192));  // zero memset: pages dropped, edges written
  ASSERT_CU(cuMemcpyDtoH(back.data(), c, n));
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char want = i >= 4096 && i < n - 4096 ? 0 : (i % kStride ? 0 : ValueAt(i));
    ASSERT_EQ(back[i], want) << i;
  }
}

TEST_F(SparseCopyTest, ShouldMoveVmmChunksToHostAndBackKeepingWrittenBytes) {
  Init();
  constexpr std::size_t kChunk = 2 * kMiB;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUdeviceptr va = 0;
  ASSERT_CU(cuMemAddressReserve(&va, 8 * kChunk, 0, 0, 0));
  CUmemGenericAllocationHandle h[4];
  CUmemAccessDesc desc{};
  desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  for (int i = 0; i < 4; ++i) {
    ASSERT_CU(cuMemCreate(&h[i], kChunk, &prop, 0));
    ASSERT_CU(cuMemMap(va + i * kChunk, kChunk, 0, h[i], 0));  // four chunks, one range
  }
  ASSERT_CU(cuMemSetAccess(va, 4 * kChunk, &desc, 1));
  const std::size_t n = 4 * kChunk;
  WriteSparse(va, n);
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, n, 0));
  std::memset(pinned, 0x77, n);
  ASSERT_CU(cuMemcpyDtoH(pinned, va, n));  // chunk to host: holes dropped in pinned memory
  EXPECT_LE(ResidentPages(reinterpret_cast<std::uintptr_t>(pinned), n), 2 * n / kMiB);
  // Stale data in the chunks, then back: the chunks' holes are punched into their memfds.
  ASSERT_CU(cuMemsetD8(va, 0x55, n));
  ASSERT_CU(cuMemcpyHtoD(va, pinned, n));
  std::vector<unsigned char> back(n);
  ASSERT_CU(cuMemcpyDtoH(back.data(), va, n));
  EXPECT_EQ(FirstMismatch(back.data(), n), n);
}

TEST_F(SparseCopyTest, ShouldNotCommitHostMemoryForNeverWrittenAllocationsCopiedBackAndForth) {
  setenv("SIMGPU_MEMORY", "16GiB", 1);
  Init();
  const std::size_t n = 8 * kGiB;
  CUdeviceptr dev = 0;
  ASSERT_CU(cuMemAlloc(&dev, n));
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, n, 0));
  const auto host = reinterpret_cast<std::uintptr_t>(pinned);
  const unsigned char mark = 42;
  ASSERT_CU(cuMemcpyHtoD(dev + 3 * kGiB + 5, &mark, 1));  // one written byte in 8 GiB
  for (int round = 0; round < 2; ++round) {
    ASSERT_CU(cuMemcpyDtoH(pinned, dev, n));
    ASSERT_CU(cuMemsetD8(dev, 0, n));
    ASSERT_CU(cuMemcpyHtoD(dev, pinned, n));
  }
  // One page each holds the written byte; nothing else was ever committed.
  EXPECT_EQ(ResidentPages(dev, n), 1u);
  EXPECT_EQ(ResidentPages(host, n), 1u);
  unsigned char got[2] = {0, 0};
  ASSERT_CU(cuMemcpyDtoH(got, dev + 3 * kGiB + 5, 2));
  EXPECT_EQ(got[0], 42);
  EXPECT_EQ(got[1], 0);
}

TEST_F(SparseCopyTest, FaultHookShouldDropTheMiddleTwoMiBOfTheChosenPinnedHostToDeviceCopy) {
  setenv("SIMGPU_FAULT_DROP_COPY", "2:4MiB", 1);
  Init();
  const std::size_t n = 6 * kMiB;
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, n, 0));
  std::memset(pinned, 0x5A, n);
  std::vector<unsigned char> pageable(n, 0x5A);
  CUdeviceptr d[4] = {};
  for (auto& p : d) {
    ASSERT_CU(cuMemAlloc(&p, n));
    ASSERT_CU(cuMemsetD8(p, 0x11, n));
  }
  ASSERT_CU(cuMemcpyHtoD(d[0], pinned, 2 * kMiB));    // too small: not counted
  ASSERT_CU(cuMemcpyHtoD(d[0], pageable.data(), n));  // pageable source: not counted
  ASSERT_CU(cuMemcpyHtoD(d[1], pinned, n));           // the first that counts
  ASSERT_CU(cuMemcpyHtoD(d[2], pinned, n));           // the second: dropped in the middle
  ASSERT_CU(cuMemcpyHtoD(d[3], pinned, n));           // the third: whole again
  std::vector<unsigned char> back(n);
  for (int i = 0; i < 4; ++i) {
    ASSERT_CU(cuMemcpyDtoH(back.data(), d[i], n));
    std::size_t stale = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const bool dropped = i == 2 && j >= 2 * kMiB && j < 4 * kMiB;
      ASSERT_EQ(back[j], dropped ? 0x11 : 0x5A) << "copy " << i << " byte " << j;
      stale += dropped;
    }
    EXPECT_EQ(stale, i == 2 ? 2 * kMiB : 0u);
  }
}

TEST_F(SparseCopyTest, DelayHookShouldLandTheMiddleTwoMiBOnlyAfterAKernelConsumedTheOldBytes) {
  setenv("SIMGPU_FAULT_DELAY_COPY", "1:4MiB", 1);
  Init();
  const std::size_t n = 6 * kMiB;
  const int floats = static_cast<int>(n / sizeof(float));
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, n, 0));
  std::vector<float> ones(n / sizeof(float), 1.0f);
  std::memcpy(pinned, ones.data(), n);
  CUdeviceptr target = 0, sum = 0;
  ASSERT_CU(cuMemAlloc(&target, n));
  ASSERT_CU(cuMemAlloc(&sum, n));
  ASSERT_CU(cuMemsetD32(target, 0x40000000u, n / 4));  // 2.0f: the old bytes
  ASSERT_CU(cuMemsetD8(sum, 0, n));
  ASSERT_CU(cuCtxSynchronize());  // the streams below do not wait for the legacy stream's memsets
  CUstream copies = nullptr, compute = nullptr;
  ASSERT_CU(cuStreamCreate(&copies, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&compute, CU_STREAM_NON_BLOCKING));
  CUevent done = nullptr;
  ASSERT_CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  // A swap-in as the shim issues it: the copy, an event, the consumer waiting on the event.
  ASSERT_CU(cuMemcpyHtoDAsync(target, pinned, n, copies));  // the chosen copy
  ASSERT_CU(cuEventRecord(done, copies));
  ASSERT_CU(cuStreamWaitEvent(compute, done, 0));
  void* args[] = {&sum, &target, const_cast<int*>(&floats)};
  ASSERT_CU(cuLaunchKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, compute, args, nullptr));
  ASSERT_CU(cuCtxSynchronize());
  EXPECT_EQ(cuEventQuery(done), CUDA_SUCCESS);  // the copy completed for its waiters
  // The consumer read the old bytes in the middle 2 MiB and the new ones elsewhere ...
  std::vector<float> back(n / sizeof(float));
  ASSERT_CU(cuMemcpyDtoH(back.data(), sum, n));
  std::size_t stale = 0;
  for (std::size_t j = 0; j < back.size(); ++j) {
    const bool middle = j * sizeof(float) >= 2 * kMiB && j * sizeof(float) < 4 * kMiB;
    ASSERT_EQ(back[j], middle ? 2.0f : 1.0f) << "float " << j;
    stale += middle;
  }
  EXPECT_EQ(stale * sizeof(float), 2 * kMiB);
  // ... and the first copy that reads the range finds the right bytes there.
  ASSERT_CU(cuMemcpyDtoH(back.data(), target, n));
  for (std::size_t j = 0; j < back.size(); ++j) ASSERT_EQ(back[j], 1.0f) << "float " << j;
}

TEST_F(SparseCopyTest, FaultHooksShouldRefuseToBeSetTogether) {
  setenv("SIMGPU_FAULT_DROP_COPY", "1:4MiB", 1);
  setenv("SIMGPU_FAULT_DELAY_COPY", "2:4MiB", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SparseCopyTest, DelayHookShouldRejectAMalformedSetting) {
  setenv("SIMGPU_FAULT_DELAY_COPY", "3", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SparseCopyTest, FaultHookShouldRejectAMalformedSetting) {
  setenv("SIMGPU_FAULT_DROP_COPY", "0:4MiB", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(SparseCopyTest, FaultHookShouldRejectAMinimumBelowTwoMiB) {
  setenv("SIMGPU_FAULT_DROP_COPY", "1:1MiB", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace simgpu_test
