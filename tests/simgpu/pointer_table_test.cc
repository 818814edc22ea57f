// simgpu's pointer-table kernel (chameleon/simgpu/pointer_table_kernel.h): it gathers through a
// device-side table of pointers, reads the table when it runs (not when it is launched), and is
// timed from its parameters. The faulting case (a table entry into an unmapped range) is in
// tests/shim/swap/pointer_table_fault_test.cc, outside the sanitizer presets.
#include <fstream>
#include <vector>

#include "chameleon/simgpu/pointer_table_kernel.h"
#include "test_util.h"

namespace simgpu_test {
namespace {

using chameleon::simgpu::kGatherViaTableKernel;

const KernelEntry kTableKernels[] = {kGatherViaTableKernel,
                                     {"block", BlockKernel, nullptr, 1, {{0, 8}}}};
const ModuleImage kTableImage{chameleon::simgpu::kModuleImageMagic,
                              chameleon::simgpu::kModuleImageVersion, 2, 0, kTableKernels};

class PointerTableTest : public ::testing::Test {
 protected:
  void Init() {
    ASSERT_CU(cuInit(0));
    CUdevice dev = 0;
    ASSERT_CU(cuDeviceGet(&dev, 0));
    ASSERT_CU(cuDevicePrimaryCtxRetain(&ctx_, dev));
    ASSERT_CU(cuCtxSetCurrent(ctx_));
    ASSERT_CU(cuModuleLoadData(&module_, &kTableImage));
    ASSERT_CU(cuModuleGetFunction(&gather_, module_, "gather_via_table"));
    ASSERT_CU(cuModuleGetFunction(&block_, module_, "block"));
  }
  CUresult Gather(CUdeviceptr table, std::uint64_t n, std::uint64_t bytes, CUdeviceptr out,
                  CUstream s) {
    void* args[] = {&table, &n, &bytes, &out};
    return cuLaunchKernel(gather_, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  /// n allocations of `bytes`, allocation i filled with the byte value i + 1.
  std::vector<CUdeviceptr> Sources(int n, std::size_t bytes) {
    std::vector<CUdeviceptr> out;
    for (int i = 0; i < n; ++i) {
      CUdeviceptr p = 0;
      EXPECT_CU(cuMemAlloc(&p, bytes));
      EXPECT_CU(cuMemsetD8(p, static_cast<unsigned char>(i + 1), bytes));
      out.push_back(p);
    }
    return out;
  }
  CUdeviceptr Table(const std::vector<CUdeviceptr>& entries) {
    CUdeviceptr t = 0;
    EXPECT_CU(cuMemAlloc(&t, entries.size() * 8));
    EXPECT_CU(cuMemcpyHtoD(t, entries.data(), entries.size() * 8));
    return t;
  }

  CUcontext ctx_ = nullptr;
  CUmodule module_ = nullptr;
  CUfunction gather_ = nullptr, block_ = nullptr;
};

TEST_F(PointerTableTest, GathersEachEntryIntoTheOutput) {
  Init();
  constexpr std::size_t kBytes = 1000;
  const auto src = Sources(5, kBytes);
  const CUdeviceptr table = Table(src);
  CUdeviceptr out = 0;
  ASSERT_CU(cuMemAlloc(&out, 5 * kBytes));
  ASSERT_CU(Gather(table, 5, kBytes, out, nullptr));
  std::vector<unsigned char> host(5 * kBytes);
  ASSERT_CU(cuMemcpyDtoH(host.data(), out, host.size()));
  for (std::size_t i = 0; i < host.size(); ++i) ASSERT_EQ(host[i], i / kBytes + 1) << "byte " << i;
}

TEST_F(PointerTableTest, TableIsReadWhenTheKernelRunsNotAtLaunch) {
  Init();
  // The gather is queued behind a blocked kernel with the table naming src[0]; the host then
  // rewrites the table (the legacy stream does not wait for a non-blocking stream) and only then
  // lets the stream run: the kernel follows what the table holds when it runs.
  constexpr std::size_t kBytes = 64;
  const auto src = Sources(2, kBytes);
  const CUdeviceptr table = Table({src[0]});
  CUstream s = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr out = 0;
  ASSERT_CU(cuMemAlloc(&out, kBytes));
  ASSERT_CU(cuCtxSynchronize());
  Gate* gate = nullptr;
  ASSERT_CU(cuMemHostAlloc(reinterpret_cast<void**>(&gate), sizeof(Gate), 0));
  new (gate) Gate;
  void* block_args[] = {&gate};
  ASSERT_CU(cuLaunchKernel(block_, 1, 1, 1, 1, 1, 1, 0, s, block_args, nullptr));
  ASSERT_CU(Gather(table, 1, kBytes, out, s));
  ASSERT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  ASSERT_CU(cuMemcpyHtoD(table, &src[1], 8));
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<unsigned char> host(kBytes);
  ASSERT_CU(cuMemcpyDtoH(host.data(), out, kBytes));
  for (unsigned char b : host) ASSERT_EQ(b, 2);
}

TEST_F(PointerTableTest, CostIsTableReadPlusSourceReadsAndOutputWrites) {
  // 1 HBM byte = 1 ns, launches +100 ns: n = 4 entries of 1000 bytes = 32 + 8000 bytes.
  std::string path = ::testing::TempDir() + "/simgpu_ptrtable_" + std::to_string(getpid());
  std::ofstream(path) << "hbm_bandwidth: 1.0e9\nlaunch_latency_ns: 100\nhost_call_ns: 10\n";
  setenv("SIMGPU_TOPOLOGY", path.c_str(), 1);
  Init();
  const auto src = Sources(4, 1000);
  const CUdeviceptr table = Table(src);
  CUdeviceptr out = 0;
  ASSERT_CU(cuMemAlloc(&out, 4000));
  CUstream s = nullptr;
  CUevent e0 = nullptr, e1 = nullptr;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuEventCreate(&e0, 0));
  ASSERT_CU(cuEventCreate(&e1, 0));
  ASSERT_CU(cuCtxSynchronize());
  ASSERT_CU(cuEventRecord(e0, s));
  ASSERT_CU(Gather(table, 4, 1000, out, s));  // starts one host call (10 ns) after e0
  ASSERT_CU(cuEventRecord(e1, s));
  ASSERT_CU(cuEventSynchronize(e1));
  float ms = 0;
  ASSERT_CU(cuEventElapsedTime(&ms, e0, e1));
  EXPECT_NEAR(static_cast<double>(ms) * 1e6, 10 + 100 + 32 + 8000, 0.5);
}

}  // namespace
}  // namespace simgpu_test
