// SIMGPU_MACHINE presets seen through the driver API: memory, NUMA ids, and virtual time of
// copies and kernels on each machine's links and throughputs. The expected times are written
// from the published figures (docs/simgpu.md "Machines"), not copied from a run: a copy of n
// bytes lasts copy_latency (1000 ns) + n / bandwidth, a kernel launch_latency (2000 ns) +
// max(flops / (peak x fraction), bytes / (HBM peak x fraction)).
#include <fstream>

#include "test_util.h"

namespace simgpu_test {
namespace {

constexpr double kCopyBytes = 1e6;

class MachineTest : public SimgpuTest {
 protected:
  void Start(const char* machine, const char* devices = "1") {
    if (machine) setenv("SIMGPU_MACHINE", machine, 1);
    setenv("SIMGPU_DEVICES", devices, 1);
    Init();
    ASSERT_CU(cuStreamCreate(&s_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(cuEventCreate(&e0_, 0));
    ASSERT_CU(cuEventCreate(&e1_, 0));
    ASSERT_CU(cuMemHostAlloc(&pinned_, static_cast<std::size_t>(kCopyBytes), 0));
    ASSERT_CU(cuMemAlloc(&dev_mem_, static_cast<std::size_t>(kCopyBytes)));
  }
  // Device time of one operation: events on both sides, minus the one driver call (1000 ns of
  // host time) between the first record and the operation's submission.
  template <typename Op>
  double TimedNs(Op op) {
    EXPECT_CU(cuEventRecord(e0_, s_));
    EXPECT_CU(op());
    EXPECT_CU(cuEventRecord(e1_, s_));
    EXPECT_CU(cuEventSynchronize(e1_));
    float ms = 0;
    EXPECT_CU(cuEventElapsedTime(&ms, e0_, e1_));
    return static_cast<double>(ms) * 1e6 - 1000;
  }
  double HostToDeviceNs() {
    return TimedNs([&] {
      return cuMemcpyHtoDAsync(dev_mem_, pinned_, static_cast<std::size_t>(kCopyBytes), s_);
    });
  }
  double DeviceToHostNs() {
    return TimedNs([&] {
      return cuMemcpyDtoHAsync(pinned_, dev_mem_, static_cast<std::size_t>(kCopyBytes), s_);
    });
  }
  double KernelNs(double flops, double bytes) {
    return TimedNs([&] { return LaunchCost(flops, bytes, s_); });
  }
  std::size_t TotalMem(int device = 0) {
    std::size_t total = 0;
    EXPECT_CU(cuDeviceTotalMem(&total, device));
    return total;
  }
  int NumaId(int device) {
    int numa = -1;
    EXPECT_CU(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, device));
    return numa;
  }
  std::string Topology(const char* yaml) {
    const std::string path = UniqueTempPath("simgpu_machine_topology");
    std::ofstream(path) << yaml;
    setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
    return path;
  }
  CUstream s_ = nullptr;
  CUevent e0_ = nullptr, e1_ = nullptr;
  void* pinned_ = nullptr;
  CUdeviceptr dev_mem_ = 0;
};

// 1000 ns latency + n / bandwidth, in ns; the tolerance covers the rounding to whole ns.
double CopyNs(double bandwidth) { return 1000 + kCopyBytes / bandwidth * 1e9; }

TEST_F(MachineTest, DefaultIsTheA100WithSymmetricLinks) {
  Start(nullptr);
  EXPECT_EQ(TotalMem(), 80ull << 30);
  EXPECT_NEAR(HostToDeviceNs(), CopyNs(25e9), 1.0);  // 41000 ns
  EXPECT_NEAR(DeviceToHostNs(), CopyNs(25e9), 1.0);
  EXPECT_NEAR(KernelNs(2.6e11, 0), 2000 + 1e6, 1.0);  // 2.6e14 flop/s achieved (the fit)
  EXPECT_NEAR(KernelNs(0, 1.5e9), 2000 + 1e6, 1.0);   // 1.5e12 B/s
  EXPECT_EQ(NumaId(0), 0);
}

TEST_F(MachineTest, NamingTheDefaultGivesTheSameMachine) {
  Start("a100-pcie4");
  EXPECT_EQ(TotalMem(), 80ull << 30);
  EXPECT_NEAR(DeviceToHostNs(), CopyNs(25e9), 1.0);
}

TEST_F(MachineTest, H200HasTheRealDeviceSizeAndAsymmetricPcieGen5Links) {
  Start("h200-sxm", "8");
  EXPECT_EQ(TotalMem(), 143771ull << 20);  // nvidia-smi's 143771MiB
  EXPECT_EQ(TotalMem(7), 143771ull << 20);
  const double h2d = HostToDeviceNs();
  const double d2h = DeviceToHostNs();
  EXPECT_NEAR(h2d, CopyNs(54.8e9), 1.0);  // 19248 ns
  EXPECT_NEAR(d2h, CopyNs(46.8e9), 1.0);  // 22368 ns
  EXPECT_GT(d2h, h2d + 3000);
  EXPECT_EQ(NumaId(0), 0);
  EXPECT_EQ(NumaId(3), 0);
  EXPECT_EQ(NumaId(4), 1);
  EXPECT_EQ(NumaId(7), 1);
}

TEST_F(MachineTest, H200ThroughputIsPeakTimesFraction) {
  Start("h200-sxm");
  EXPECT_NEAR(KernelNs(989e12 * 0.70 * 1e-3, 0), 2000 + 1e6, 1.0);  // 1 ms of bf16 GEMM
  EXPECT_NEAR(KernelNs(0, 4.8e12 * 0.80 * 1e-3), 2000 + 1e6, 1.0);  // 1 ms of HBM3e
}

TEST_F(MachineTest, H100HasEightyGibAndHbm3) {
  Start("h100-sxm5");
  EXPECT_EQ(TotalMem(), 80ull << 30);
  EXPECT_NEAR(KernelNs(0, 3.35e12 * 0.80 * 1e-3), 2000 + 1e6, 1.0);
  EXPECT_NEAR(KernelNs(989e12 * 0.52 * 1e-3, 0), 2000 + 1e6, 1.0);
  EXPECT_NEAR(HostToDeviceNs(), CopyNs(54.8e9), 1.0);
  EXPECT_NEAR(DeviceToHostNs(), CopyNs(46.8e9), 1.0);
}

TEST_F(MachineTest, PeerCopiesUseTheNvlinkFigure) {
  Start("h100-sxm5", "2");
  CUcontext ctx1 = nullptr;
  ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
  ASSERT_CU(cuCtxSetCurrent(ctx1));
  CUdeviceptr peer = 0;
  ASSERT_CU(cuMemAlloc(&peer, static_cast<std::size_t>(kCopyBytes)));
  ASSERT_CU(cuCtxSetCurrent(ctx_));
  const double ns = TimedNs([&] {
    return cuMemcpyPeerAsync(peer, ctx1, dev_mem_, ctx_, static_cast<std::size_t>(kCopyBytes), s_);
  });
  EXPECT_NEAR(ns, CopyNs(370e9), 1.0);  // 3703 ns
}

TEST_F(MachineTest, TopologyFileOverridesThePresetAndMemoryVariableOverridesBoth) {
  Topology(
      "device_memory: 16GiB\n"
      "device_to_host_bandwidth: 1.0e9\n"
      "gemm_achieved_fraction: 0.35\n");  // scales the preset's 989 TFLOPS peak
  setenv("SIMGPU_MEMORY", "24GiB", 1);
  Start("h200-sxm");
  EXPECT_EQ(TotalMem(), 24ull << 30);
  EXPECT_NEAR(DeviceToHostNs(), CopyNs(1e9), 1.0);
  EXPECT_NEAR(HostToDeviceNs(), CopyNs(54.8e9), 1.0);  // untouched by the file
  EXPECT_NEAR(KernelNs(989e12 * 0.70 * 1e-3, 0), 2000 + 2e6, 1.0);
}

TEST_F(MachineTest, TopologyFileSetsMemoryWhenTheVariableIsUnset) {
  Topology("device_memory: 16GiB\nhost_link_bandwidth: 1.0e9\n");
  Start("h100-sxm5");
  EXPECT_EQ(TotalMem(), 16ull << 30);
  EXPECT_NEAR(HostToDeviceNs(), CopyNs(1e9), 1.0);  // host_link_bandwidth sets both directions
  EXPECT_NEAR(DeviceToHostNs(), CopyNs(1e9), 1.0);
}

TEST_F(MachineTest, InstalledPresetFileAsTopologyGivesThePreset) {
  // The installed YAML is the same schema: as SIMGPU_TOPOLOGY over the default machine it
  // turns the A100 into the H200.
  setenv("SIMGPU_TOPOLOGY", SIMGPU_MACHINES_DIR "/h200-sxm.yaml", 1);
  Start(nullptr, "8");
  EXPECT_EQ(TotalMem(), 143771ull << 20);
  EXPECT_NEAR(DeviceToHostNs(), CopyNs(46.8e9), 1.0);
  EXPECT_EQ(NumaId(5), 1);
}

class MachineErrorTest : public ::testing::Test {};

TEST_F(MachineErrorTest, UnknownPresetFailsInit) {
  setenv("SIMGPU_MACHINE", "h300-sxm", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MachineErrorTest, AchievedFigureAndFractionTogetherFailInit) {
  const std::string path = UniqueTempPath("simgpu_machine_bad");
  std::ofstream(path) << "peak_flops: 1.0e14\ngemm_achieved_fraction: 0.5\n";
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MachineErrorTest, FractionWithoutAPeakFailsInit) {
  // The default A100's figures are a fit with no peak to scale.
  const std::string path = UniqueTempPath("simgpu_machine_bad");
  std::ofstream(path) << "hbm_achieved_fraction: 0.5\n";
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MachineErrorTest, FractionAboveOneFailsInit) {
  const std::string path = UniqueTempPath("simgpu_machine_bad");
  std::ofstream(path) << "gemm_achieved_fraction: 1.5\n";
  setenv("SIMGPU_MACHINE", "h100-sxm5", 1);
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MachineErrorTest, DeviceOnANumaNodeWithoutHostMemoryFailsInit) {
  const std::string path = UniqueTempPath("simgpu_machine_bad");
  std::ofstream(path) << "numa_nodes: [0, 2]\n";  // the A100 node has NUMA nodes 0 and 1
  setenv("SIMGPU_DEVICES", "2", 1);
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(MachineErrorTest, UnreadableHostNumaBytesFailsInit) {
  const std::string path = UniqueTempPath("simgpu_machine_bad");
  std::ofstream(path) << "host_numa_bytes: {a: 1TiB}\n";
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

}  // namespace
}  // namespace simgpu_test
