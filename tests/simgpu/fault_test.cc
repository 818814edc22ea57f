// Deliberate faults: simulated device work touching unmapped or ordinary host memory. These run
// outside the sanitizer presets (simgpu catches SIGSEGV in its worker threads; see docs/simgpu.md).
#include <csignal>
#include <cstdlib>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr size_t kPage = 2u << 20;

class FaultTest : public SimgpuTest {
 protected:
  void SetUp() override { Init(); }

  // A reservation whose only chunk was mapped, used and then unmapped (a swapped-out range).
  CUdeviceptr SwappedOutRange() {
    CUdeviceptr va = 0;
    EXPECT_CU(cuMemAddressReserve(&va, kPage, 0, 0, 0));
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CUmemGenericAllocationHandle h;
    EXPECT_CU(cuMemCreate(&h, kPage, &p, 0));
    EXPECT_CU(cuMemMap(va, kPage, 0, h, 0));
    CUmemAccessDesc desc{};
    desc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    desc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    EXPECT_CU(cuMemSetAccess(va, kPage, &desc, 1));
    EXPECT_CU(LaunchTouch(va, nullptr));  // fine while mapped
    EXPECT_CU(cuCtxSynchronize());
    EXPECT_CU(cuMemUnmap(va, kPage));
    EXPECT_CU(cuMemRelease(h));
    return va;
  }
};

TEST_F(FaultTest, TouchingUnmappedVmmIsStickyIllegalAddress) {
  CUdeviceptr va = SwappedOutRange();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  EXPECT_CU(LaunchTouch(va + 64, s));  // the launch itself succeeds; the fault is asynchronous
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  // Sticky: every later call on the context fails the same way.
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, 64), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(LaunchAppend(0, 1, nullptr), CUDA_ERROR_ILLEGAL_ADDRESS);
  // Resetting the primary context is the way out, as on a GPU.
  ASSERT_CU(cuDevicePrimaryCtxReset(dev_));
  EXPECT_CU(cuMemAlloc(&p, 64));
}

TEST_F(FaultTest, WorkQueuedAfterTheFaultDoesNotRun) {
  CUdeviceptr va = SwappedOutRange();
  CUdeviceptr flag = 0;
  ASSERT_CU(cuMemAlloc(&flag, 64));
  ASSERT_CU(cuMemsetD8(flag, 0, 64));
  ASSERT_CU(cuCtxSynchronize());
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(LaunchTouch(va, s));
  cuLaunchKernel(Fn("touch"), 1, 1, 1, 1, 1, 1, 0, s, std::vector<void*>{&flag}.data(), nullptr);
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(*reinterpret_cast<volatile char*>(flag), 0);  // peek: simgpu memory is host memory
}

TEST_F(FaultTest, CopyFromUnmappedRangeIsIllegalAddress) {
  CUdeviceptr va = SwappedOutRange();
  char buf[16];
  EXPECT_EQ(cuMemcpyDtoH(buf, va, sizeof buf), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(FaultTest, OrdinaryHostPointerArgumentFaults) {
  std::vector<char> host(64, 0);
  CUdeviceptr p = reinterpret_cast<CUdeviceptr>(host.data());
  EXPECT_CU(LaunchTouch(p, nullptr));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
  EXPECT_EQ(host[0], 0);  // the kernel never ran on host memory
}

TEST_F(FaultTest, FreedDevicePointerArgumentFaults) {
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAlloc(&p, 4096));
  ASSERT_CU(cuMemFree(p));
  EXPECT_CU(LaunchTouch(p, nullptr));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
}

TEST_F(FaultTest, FaultsOutsideDeviceWorkStillKillTheProcess) {
  // simgpu's handler only catches faults inside simulated device work; others keep their
  // default action (or a sanitizer's handler).
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // workers do not survive fork
  EXPECT_EXIT(
      {
        CUdeviceptr va = SwappedOutRange();
        *reinterpret_cast<volatile char*>(va) = 1;
      },
      ::testing::KilledBySignal(SIGSEGV), "");
}

}  // namespace
}  // namespace simgpu_test
