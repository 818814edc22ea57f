// Initialisation, devices, environment, errors, modules and launches.
#include <cstring>
#include <fstream>
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

class ApiTest : public SimgpuTest {};

TEST_F(ApiTest, CallsBeforeInitFailWithNotInitialized) {
  int n = 0;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
  CUdeviceptr p;
  EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_NOT_INITIALIZED);
  const char* name = nullptr;  // error names work without cuInit
  EXPECT_CU(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name));
  EXPECT_STREQ(name, "CUDA_ERROR_OUT_OF_MEMORY");
}

TEST_F(ApiTest, NoCurrentContextIsInvalidContext) {
  ASSERT_CU(cuInit(0));
  CUdeviceptr p;
  EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_INVALID_CONTEXT);
  CUstream s;
  EXPECT_EQ(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(ApiTest, DevicesAndMemoryComeFromEnvironment) {
  setenv("SIMGPU_DEVICES", "3", 1);
  setenv("SIMGPU_MEMORY", "512MiB", 1);
  ASSERT_CU(cuInit(0));
  int n = 0;
  ASSERT_CU(cuDeviceGetCount(&n));
  EXPECT_EQ(n, 3);
  CUdevice d;
  EXPECT_EQ(cuDeviceGet(&d, 3), CUDA_ERROR_INVALID_DEVICE);
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, 2));
  EXPECT_EQ(total, 512u << 20);
  char name[64];
  ASSERT_CU(cuDeviceGetName(name, sizeof name, 1));
  EXPECT_NE(std::strstr(name, "simgpu"), nullptr);
}

TEST_F(ApiTest, DefaultIsOneDeviceOf80GiB) {
  ASSERT_CU(cuInit(0));
  int n = 0;
  ASSERT_CU(cuDeviceGetCount(&n));
  EXPECT_EQ(n, 1);
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(total, 80ull << 30);
}

TEST_F(ApiTest, MalformedEnvironmentFailsInitClearly) {
  setenv("SIMGPU_MEMORY", "12X", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
  int n = 0;
  EXPECT_EQ(cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
}

TEST_F(ApiTest, MemoryAcceptsBinarySuffixWithIB) {
  setenv("SIMGPU_MEMORY", "3GiB", 1);
  ASSERT_CU(cuInit(0));
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(total, 3ull << 30);
}

// The one byte-size grammar (chameleon/ipc/byte_size.h): a unit without "i" is decimal, as in
// the shim's CHAMELEON_DEVICE_LIMIT and the daemon's memory_limit.
TEST_F(ApiTest, MemoryReadsDecimalUnitsAsPowersOfTen) {
  setenv("SIMGPU_MEMORY", "16GB", 1);
  ASSERT_CU(cuInit(0));
  size_t total = 0;
  ASSERT_CU(cuDeviceTotalMem(&total, 0));
  EXPECT_EQ(total, 16'000'000'000ull);
}

TEST_F(ApiTest, ZeroMemoryIsRejected) {
  setenv("SIMGPU_MEMORY", "0GiB", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ApiTest, ZeroDevicesIsRejected) {
  setenv("SIMGPU_DEVICES", "0", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ApiTest, MissingTopologyFileFailsInit) {
  setenv("SIMGPU_TOPOLOGY", "/nonexistent/simgpu.yaml", 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ApiTest, MalformedTopologyFailsInit) {
  std::string path = UniqueTempPath("simgpu_bad_topology");
  std::ofstream(path) << "peer_links: [ {from: 0, to: 7, bandwidth: 1e9} ]\n";
  setenv("SIMGPU_DEVICES", "2", 1);
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  EXPECT_EQ(cuInit(0), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(ApiTest, TopologySetsNumaAndPeerLinks) {
  std::string path = UniqueTempPath("simgpu_topology");
  std::ofstream(path) << "numa_nodes: [0, 1, 1]\n"
                         "peer_links:\n  - {from: 0, to: 1, bandwidth: 3.0e11}\n";
  setenv("SIMGPU_DEVICES", "3", 1);
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  ASSERT_CU(cuInit(0));
  int numa = -1;
  ASSERT_CU(cuDeviceGetAttribute(&numa, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, 2));
  EXPECT_EQ(numa, 1);
  int v = -1;
  ASSERT_CU(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 1, 0));
  EXPECT_EQ(v, 1);  // links are bidirectional unless stated
  ASSERT_CU(cuDeviceGetP2PAttribute(&v, CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED, 0, 2));
  EXPECT_EQ(v, 0);
  int can = -1;
  ASSERT_CU(cuDeviceCanAccessPeer(&can, 0, 1));
  EXPECT_EQ(can, 1);
}

TEST_F(ApiTest, AttributesLookLikeTheCalibrationA100AndRejectBadIds) {
  ASSERT_CU(cuInit(0));
  int major = 0, sms = 0, vmm = 0;
  ASSERT_CU(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0));
  ASSERT_CU(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  ASSERT_CU(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
  EXPECT_EQ(major, 8);
  EXPECT_EQ(sms, 108);
  EXPECT_EQ(vmm, 1);
  int v;
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 5), CUDA_ERROR_INVALID_DEVICE);
  int version = 0;
  ASSERT_CU(cuDriverGetVersion(&version));
  EXPECT_EQ(version, CUDA_VERSION);
}

TEST_F(ApiTest, ErrorNamesAndStrings) {
  const char* s = nullptr;
  ASSERT_CU(cuGetErrorName(CUDA_ERROR_ILLEGAL_ADDRESS, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_ILLEGAL_ADDRESS");
  ASSERT_CU(cuGetErrorString(CUDA_ERROR_NOT_READY, &s));
  EXPECT_NE(std::strstr(s, "not completed"), nullptr);
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(12345), &s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(s, nullptr);
}

TEST_F(ApiTest, ModuleImageIsValidated) {
  Init();
  ModuleImage bad = kImage;
  bad.magic = 0x464c457f;  // "\x7fELF": a real cubin is not a simgpu image
  CUmodule m;
  EXPECT_EQ(cuModuleLoadData(&m, &bad), CUDA_ERROR_INVALID_IMAGE);
  KernelEntry too_many = kKernels[0];
  too_many.param_count = 33;
  ModuleImage bad2 = kImage;
  bad2.kernels = &too_many;
  bad2.kernel_count = 1;
  EXPECT_EQ(cuModuleLoadData(&m, &bad2), CUDA_ERROR_INVALID_IMAGE);
  CUfunction f;
  EXPECT_EQ(cuModuleGetFunction(&f, module_, "nope"), CUDA_ERROR_NOT_FOUND);
}

TEST_F(ApiTest, FunctionNameAndParameterLayout) {
  Init();
  const char* name = nullptr;
  ASSERT_CU(cuFuncGetName(&name, Fn("add")));
  EXPECT_STREQ(name, "add");
  size_t offset = 0, size = 0;
  ASSERT_CU(cuFuncGetParamInfo(Fn("add"), 2, &offset, &size));
  EXPECT_EQ(offset, 16u);
  EXPECT_EQ(size, 4u);
  EXPECT_EQ(cuFuncGetParamInfo(Fn("add"), 3, &offset, &size), CUDA_ERROR_INVALID_VALUE);
}

class LaunchTest : public SimgpuTest {
 protected:
  void SetUp() override {
    Init();
    std::vector<float> one(kN, 1.0f), two(kN, 2.0f);
    ASSERT_CU(cuMemAlloc(&a_, kN * sizeof(float)));
    ASSERT_CU(cuMemAlloc(&b_, kN * sizeof(float)));
    ASSERT_CU(cuMemcpyHtoD(a_, one.data(), kN * sizeof(float)));
    ASSERT_CU(cuMemcpyHtoD(b_, two.data(), kN * sizeof(float)));
  }
  float First() {
    float v = 0;
    EXPECT_CU(cuMemcpyDtoH(&v, a_, sizeof v));
    return v;
  }
  static constexpr int kN = 1000;
  CUdeviceptr a_ = 0, b_ = 0;
};

TEST_F(LaunchTest, KernelParamsArray) {
  int n = kN;
  void* args[] = {&a_, &b_, &n};
  ASSERT_CU(cuLaunchKernel(Fn("add"), 1, 1, 1, 32, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_EQ(First(), 3.0f);
}

TEST_F(LaunchTest, ExParamBufferPointerInExtra) {
  struct {
    CUdeviceptr a, b;
    int n;
  } packed{a_, b_, kN};
  size_t size = sizeof packed;
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CUlaunchConfig cfg{};
  cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
  cfg.blockDimX = cfg.blockDimY = cfg.blockDimZ = 1;
  ASSERT_CU(cuLaunchKernelEx(&cfg, Fn("add"), nullptr, extra));
  EXPECT_EQ(First(), 3.0f);
  size = 8;  // too small for the layout
  EXPECT_EQ(cuLaunchKernelEx(&cfg, Fn("add"), nullptr, extra), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(LaunchTest, CooperativeLaunch) {
  int n = kN;
  void* args[] = {&a_, &b_, &n};
  ASSERT_CU(cuLaunchCooperativeKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, nullptr, args));
  ASSERT_CU(cuLaunchCooperativeKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, nullptr, args));
  EXPECT_EQ(First(), 5.0f);
}

TEST_F(LaunchTest, BadGeometryAndMissingParamsAreInvalidValue) {
  int n = kN;
  void* args[] = {&a_, &b_, &n};
  EXPECT_EQ(cuLaunchKernel(Fn("add"), 0, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(Fn("add"), 1, 1, 1, 1025, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(LaunchTest, PinnedHostArgumentIsLegal) {
  void* host = nullptr;
  ASSERT_CU(cuMemHostAlloc(&host, kN * sizeof(float), 0));
  auto* h = static_cast<float*>(host);
  for (int i = 0; i < kN; ++i) h[i] = 10.0f;
  CUdeviceptr hp = 0;
  ASSERT_CU(cuMemHostGetDevicePointer(&hp, host, 0));
  int n = kN;
  void* args[] = {&a_, &hp, &n};
  ASSERT_CU(cuLaunchKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_EQ(First(), 11.0f);
}

TEST_F(LaunchTest, CallCountsAreExactPerExportedName) {
  const auto before = simgpuGetCallCount("cuLaunchKernel");
  const auto alloc_before = simgpuGetCallCount("cuMemAlloc_v2");
  int n = kN;
  void* args[] = {&a_, &b_, &n};
  for (int i = 0; i < 7; ++i)
    ASSERT_CU(cuLaunchKernel(Fn("add"), 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr));
  EXPECT_EQ(simgpuGetCallCount("cuLaunchKernel") - before, 7u);
  EXPECT_EQ(simgpuGetCallCount("cuMemAlloc_v2"), alloc_before);
  EXPECT_EQ(simgpuGetCallCount("cuLaunchKernel_ptsz"), 0u);
  EXPECT_EQ(simgpuGetCallCount("no such entry"), 0u);
}

}  // namespace
}  // namespace simgpu_test

namespace simgpu_test {
namespace {

TEST_F(ApiTest, ReportPrintsPhysicalPeakAtExit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("SIMGPU_REPORT", "1", 1);
        Init();
        CUdeviceptr p = 0;
        if (cuMemAlloc(&p, 3 << 20) != CUDA_SUCCESS || cuMemFree(p) != CUDA_SUCCESS) std::abort();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "device 0 physical peak 3145728 bytes");
}

}  // namespace
}  // namespace simgpu_test
