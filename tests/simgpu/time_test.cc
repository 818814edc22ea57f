// Virtual time on hand-computed cases. The topology file sets round numbers: 1 flop = 1 ns,
// 1 HBM byte = 1 ns, 1 host-link byte = 10 ns, 1 peer byte = 2 ns; kernels +100 ns, copies +50 ns,
// every driver call advances the host clock by 10 ns; 1 collective link byte = 4 ns.
#include <fstream>
#include <latch>

#include "test_util.h"

namespace simgpu_test {
namespace {

class TimeTest : public SimgpuTest {
 protected:
  void SetUp() override {
    std::string path = UniqueTempPath("simgpu_time_topology");
    std::ofstream(path) << "peak_flops: 1.0e9\n"
                           "hbm_bandwidth: 1.0e9\n"
                           "host_link_bandwidth: 1.0e8\n"
                           "launch_latency_ns: 100\n"
                           "copy_latency_ns: 50\n"
                           "host_call_ns: 10\n"
                           "peer_link_bandwidth: 2.5e8\n"
                           "peer_links:\n  - {from: 0, to: 1, bandwidth: 5.0e8}\n";
    setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
    setenv("SIMGPU_DEVICES", "2", 1);
    Init();
    ASSERT_CU(cuStreamCreate(&a_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cuStreamCreate(&b_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cuEventCreate(&e0_, 0));
    ASSERT_CU(cuEventCreate(&e1_, 0));
  }
  // Elapsed virtual ns between two recorded events (after synchronising on the second).
  double ElapsedNs(CUevent start, CUevent end) {
    EXPECT_CU(cuEventSynchronize(end));
    float ms = 0;
    EXPECT_CU(cuEventElapsedTime(&ms, start, end));
    return static_cast<double>(ms) * 1e6;
  }
  CUstream a_ = nullptr, b_ = nullptr;
  CUevent e0_ = nullptr, e1_ = nullptr;
};

TEST_F(TimeTest, EveryDriverCallCostsTheHostTenNanoseconds) {
  const std::uint64_t before = simgpuHostVirtualNs();
  int v = 0;
  for (int i = 0; i < 5; ++i) ASSERT_CU(cuDriverGetVersion(&v));
  EXPECT_EQ(simgpuHostVirtualNs() - before, 50u);
}

TEST_F(TimeTest, KernelIsLatencyPlusMaxOfComputeAndMemory) {
  ASSERT_CU(cuEventRecord(e0_, a_));     // t0 = host time now
  ASSERT_CU(LaunchCost(1000, 500, a_));  // starts t0 + 10 (one call later), 100 + 1000
  ASSERT_CU(LaunchCost(200, 3000, a_));  // queued behind it: 100 + 3000
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 1100 + 3100, 0.5);
}

TEST_F(TimeTest, IdleGapsCountWhenTheHostIsTheBottleneck) {
  ASSERT_CU(cuEventRecord(e0_, a_));
  for (int i = 0; i < 4; ++i) ASSERT_CU(LaunchCost(1, 0, a_));  // each 101 ns, launched 10 ns apart
  int v = 0;
  for (int i = 0; i < 100; ++i) ASSERT_CU(cuDriverGetVersion(&v));  // host busy for 1000 ns
  ASSERT_CU(LaunchCost(1, 0, a_));  // starts when submitted, not when the stream went idle
  ASSERT_CU(cuEventRecord(e1_, a_));
  // Kernel 1 starts at t0+10 and the rest follow back to back (t0+414); the fifth is launched
  // at t0 + 4*10 + 1000 + 10 = t0+1050 and ends at t0+1151. The final record is at t0+1060.
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 1151, 0.5);
}

TEST_F(TimeTest, HostCopyIsBytesOverHostLink) {
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, 1000, 0));
  CUdeviceptr d = 0;
  ASSERT_CU(cuMemAlloc(&d, 1000));
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuMemcpyHtoDAsync(d, pinned, 1000, a_));
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 50 + 10000, 0.5);
}

TEST_F(TimeTest, OverlappingCopiesOnOneLinkShareIt) {
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, 2000, 0));
  CUdeviceptr d = 0;
  ASSERT_CU(cuMemAlloc(&d, 2000));
  CUevent b0, b1;
  ASSERT_CU(cuEventCreate(&b0, 0));
  ASSERT_CU(cuEventCreate(&b1, 0));
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuMemcpyHtoDAsync(d, pinned, 1000, a_));  // alone on the link: 50 + 10000
  ASSERT_CU(cuEventRecord(e1_, a_));
  ASSERT_CU(cuEventRecord(b0, b_));
  ASSERT_CU(cuMemcpyHtoDAsync(d + 1000, static_cast<char*>(pinned) + 1000, 1000, b_));
  ASSERT_CU(cuEventRecord(b1, b_));  // started while the first was in flight: half bandwidth
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 50 + 10000, 0.5);
  EXPECT_NEAR(ElapsedNs(b0, b1), 10 + 50 + 20000, 0.5);
}

TEST_F(TimeTest, DeviceToDeviceReadsAndWritesHbmAndPeerUsesItsLink) {
  CUdeviceptr x = 0, y = 0;
  ASSERT_CU(cuMemAlloc(&x, 1000));
  ASSERT_CU(cuMemAlloc(&y, 1000));
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuMemcpyDtoDAsync(y, x, 1000, a_));  // 50 + 2 * 1000 bytes at 1 ns/byte
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 50 + 2000, 0.5);

  CUcontext ctx1;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
  ASSERT_CU(cuCtxSetCurrent(ctx1));
  CUdeviceptr z = 0;
  ASSERT_CU(cuMemAlloc(&z, 1000));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuMemcpyPeerAsync(z, ctx1, x, ctx_, 1000, a_));  // 50 + 1000 bytes at 2 ns/byte
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 50 + 2000, 0.5);
}

TEST_F(TimeTest, StreamWaitEventTakesTheMaximum) {
  ASSERT_CU(LaunchCost(5000, 0, a_));  // a: ends at t+10+5100
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuStreamWaitEvent(b_, e0_, 0));
  ASSERT_CU(LaunchCost(1000, 0, b_));  // b's clock jumps to e0, then 1100
  ASSERT_CU(cuEventRecord(e1_, b_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 1100, 0.5);
}

TEST_F(TimeTest, SynchronisationMovesTheHostClockToTheDevice) {
  ASSERT_CU(LaunchCost(100000, 0, a_));
  const std::uint64_t launched = simgpuHostVirtualNs();
  ASSERT_CU(cuStreamSynchronize(a_));
  // The kernel started at `launched` and ran 100 + 100000 ns; the sync call itself cost 10.
  EXPECT_EQ(simgpuHostVirtualNs(), launched + 100100);
  EXPECT_EQ(simgpuDeviceVirtualNs(0), launched + 100100);
}

void CountDown(void* latch) { static_cast<std::latch*>(latch)->count_down(); }

// A poll answers as of the host's virtual time: work whose virtual end lies ahead is not ready
// even after simgpu's worker ran it (else the poll would move the host clock to that end: a wait
// where the program asked not to wait), and such a poll costs one host call; a busy-wait loop
// ends within one call of the work's end.
TEST_F(TimeTest, APollBeforeTheVirtualEndSaysNotReadyAndCostsAHostCall) {
  ASSERT_CU(LaunchCost(100000, 0, a_));
  const std::uint64_t launched = simgpuHostVirtualNs();
  ASSERT_CU(cuEventRecord(e0_, a_));
  std::latch reached(1);
  ASSERT_CU(cuLaunchHostFunc(a_, CountDown, &reached));
  reached.wait();  // the worker has run the kernel and the event
  const std::uint64_t before = simgpuHostVirtualNs();
  EXPECT_EQ(cuEventQuery(e0_), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(a_), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(simgpuHostVirtualNs(), before + 20);  // two calls at host_call_ns = 10
  CUresult r;
  while ((r = cuEventQuery(e0_)) == CUDA_ERROR_NOT_READY) {
  }
  ASSERT_CU(r);
  const std::uint64_t end = launched + 100 + 100000;  // the kernel's virtual end
  EXPECT_GE(simgpuHostVirtualNs(), end);
  EXPECT_LE(simgpuHostVirtualNs(), end + 20);  // the last "not ready" and the answer
}

// Work that is due in virtual time is done, so a poll waits (in wall time) for a worker that is
// behind; only work that stays blocked (here a kernel behind a gate the test holds) is not ready
// after that wait, and such polls are free: their number must not leak into virtual time.
TEST_F(TimeTest, PollsOfDueWorkThatStaysBlockedAreFree) {
  Gate* gate = NewPinnedGate();
  ASSERT_CU(LaunchBlock(gate, b_));
  ASSERT_CU(LaunchCost(100000, 0, a_));  // the host polls a_ past the blocked kernel's end
  CUresult r;
  while ((r = cuStreamQuery(a_)) == CUDA_ERROR_NOT_READY) {
  }
  ASSERT_CU(r);
  const std::uint64_t before = simgpuHostVirtualNs();
  for (int i = 0; i < 2; ++i) ASSERT_EQ(cuStreamQuery(b_), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(simgpuHostVirtualNs(), before);
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(b_));
}

TEST_F(TimeTest, PinnedHostKernelArgumentsRunAtHostLinkBandwidth) {
  void* pinned = nullptr;
  ASSERT_CU(cuMemHostAlloc(&pinned, 4096, 0));
  CUdeviceptr d = 0;
  ASSERT_CU(cuMemAlloc(&d, 4096));
  int n = 100;  // add: n flops, 12n bytes -> 1200 bytes at 10 ns/byte instead of 1 ns/byte
  CUdeviceptr h = reinterpret_cast<CUdeviceptr>(pinned);
  void* args[] = {&d, &h, &n};
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuLaunchKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, a_, args, nullptr));
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 100 + 12000, 0.5);
}

// link(double flops, double bytes, double link_bytes): costs exactly what it is told.
KernelCost GivenLinkCost(void* const* p, const LaunchDims&) {
  return {*static_cast<const double*>(p[0]), *static_cast<const double*>(p[1]),
          *static_cast<const double*>(p[2])};
}
const KernelEntry kLinkKernels[] = {
    {"link", NoopKernel, GivenLinkCost, 3, {{0, 8}, {8, 8}, {16, 8}}}};
const ModuleImage kLinkImage{chameleon::simgpu::kModuleImageMagic,
                             chameleon::simgpu::kModuleImageVersion, 1, 0, kLinkKernels};

// A version-1 image: its cost function returns the two-double struct of that version.
chameleon::simgpu::KernelCostV1 GivenCostV1(void* const* p, const LaunchDims&) {
  return {*static_cast<const double*>(p[0]), *static_cast<const double*>(p[1])};
}
const KernelEntry kV1Kernels[] = {
    {"cost_v1",
     NoopKernel,
     reinterpret_cast<chameleon::simgpu::KernelCostFn>(reinterpret_cast<void (*)()>(GivenCostV1)),
     2,
     {{0, 8}, {8, 8}}}};
const ModuleImage kV1Image{chameleon::simgpu::kModuleImageMagic, 1, 1, 0, kV1Kernels};

TEST_F(TimeTest, CollectiveLinkBytesRunAtPeerLinkBandwidth) {
  CUmodule module = nullptr;
  CUfunction link = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, &kLinkImage));
  ASSERT_CU(cuModuleGetFunction(&link, module, "link"));
  double flops = 300, bytes = 200, link_bytes = 250;  // 300 ns, 200 ns, 1000 ns: link wins
  void* args[] = {&flops, &bytes, &link_bytes};
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuLaunchKernel(link, 1, 1, 1, 1, 1, 1, 0, a_, args, nullptr));
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 100 + 1000, 0.5);
}

TEST_F(TimeTest, VersionOneImagesStillLoadAndTime) {
  CUmodule module = nullptr;
  CUfunction cost = nullptr;
  ASSERT_CU(cuModuleLoadData(&module, &kV1Image));
  ASSERT_CU(cuModuleGetFunction(&cost, module, "cost_v1"));
  double flops = 700, bytes = 400;
  void* args[] = {&flops, &bytes};
  ASSERT_CU(cuEventRecord(e0_, a_));
  ASSERT_CU(cuLaunchKernel(cost, 1, 1, 1, 1, 1, 1, 0, a_, args, nullptr));
  ASSERT_CU(cuEventRecord(e1_, a_));
  EXPECT_NEAR(ElapsedNs(e0_, e1_), 10 + 100 + 700, 0.5);
}

TEST_F(TimeTest, SameProgramSameTimes) {
  // Virtual time depends on the call sequence only, not on worker scheduling.
  double first = 0;
  for (int round = 0; round < 2; ++round) {
    ASSERT_CU(cuEventRecord(e0_, a_));
    for (int i = 0; i < 50; ++i) {
      ASSERT_CU(LaunchCost(100 * i, 50 * i, i % 2 ? a_ : b_));
      if (i % 7 == 0) {
        ASSERT_CU(cuEventRecord(e1_, a_));
        ASSERT_CU(cuStreamWaitEvent(b_, e1_, 0));
      }
    }
    ASSERT_CU(cuEventRecord(e1_, b_));
    const double t = ElapsedNs(e0_, e1_);
    ASSERT_CU(cuCtxSynchronize());
    if (round == 0) {
      first = t;
    } else {
      EXPECT_EQ(t, first);
    }
  }
}

}  // namespace
}  // namespace simgpu_test
