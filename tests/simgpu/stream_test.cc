// Streams are truly asynchronous and ordered; events order work across streams.
#include <vector>

#include "test_util.h"

namespace simgpu_test {
namespace {

class StreamTest : public SimgpuTest {
 protected:
  void SetUp() override { Init(); }

  std::vector<int> ReadLog(CUdeviceptr log) {
    int n = 0;
    EXPECT_CU(cuMemcpyDtoH(&n, log, sizeof n));
    std::vector<int> v(static_cast<std::size_t>(n));
    if (n > 0) {
      EXPECT_CU(cuMemcpyDtoH(v.data(), log + sizeof(int), sizeof(int) * v.size()));
    }
    return v;
  }
  CUdeviceptr NewLog() {
    CUdeviceptr log = 0;
    EXPECT_CU(cuMemAlloc(&log, 4096));
    EXPECT_CU(cuMemsetD8(log, 0, 4096));
    return log;
  }
};

TEST_F(StreamTest, LaunchReturnsWhileKernelIsBlockedAndQuerySaysNotReady) {
  Gate* gate = NewPinnedGate();
  ASSERT_NE(gate, nullptr);
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(LaunchBlock(gate, s));  // returns although the kernel cannot finish yet
  CUevent e;
  ASSERT_CU(cuEventCreate(&e, 0));
  ASSERT_CU(cuEventRecord(e, s));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuEventQuery(e), CUDA_ERROR_NOT_READY);
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, e, e), CUDA_ERROR_NOT_READY);
  gate->Open();
  EXPECT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(gate->entered.load(), 1);
  EXPECT_CU(cuStreamQuery(s));
  EXPECT_CU(cuEventQuery(e));
}

TEST_F(StreamTest, KernelsOnOneStreamRunInSubmissionOrder) {
  CUdeviceptr log = NewLog();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, 0));
  for (int i = 1; i <= 200; ++i) ASSERT_CU(LaunchAppend(log, i, s));
  ASSERT_CU(cuStreamSynchronize(s));
  std::vector<int> expected(200);
  for (int i = 0; i < 200; ++i) expected[static_cast<std::size_t>(i)] = i + 1;
  EXPECT_EQ(ReadLog(log), expected);
}

TEST_F(StreamTest, EventOrdersWorkAcrossStreams) {
  Gate* gate = NewPinnedGate();
  CUdeviceptr log = NewLog();
  ASSERT_CU(cuCtxSynchronize());
  CUstream a, b;
  ASSERT_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e;
  ASSERT_CU(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  ASSERT_CU(LaunchBlock(gate, a));
  ASSERT_CU(LaunchAppend(log, 1, a));
  ASSERT_CU(cuEventRecord(e, a));
  ASSERT_CU(cuStreamWaitEvent(b, e, 0));
  ASSERT_CU(LaunchAppend(log, 2, b));
  EXPECT_EQ(cuStreamQuery(b), CUDA_ERROR_NOT_READY);  // held back by the event
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(b));
  EXPECT_CU(cuStreamQuery(a));  // b's work could only finish after a's
  EXPECT_EQ(ReadLog(log), (std::vector<int>{1, 2}));
}

TEST_F(StreamTest, NonBlockingStreamsDoNotWaitForEachOther) {
  Gate* gate = NewPinnedGate();
  CUdeviceptr log = NewLog();
  ASSERT_CU(cuCtxSynchronize());
  CUstream a, b;
  ASSERT_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(LaunchBlock(gate, a));
  ASSERT_CU(LaunchAppend(log, 5, b));
  ASSERT_CU(cuStreamSynchronize(b));  // completes while a is still blocked
  EXPECT_EQ(cuStreamQuery(a), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(ReadLog(log), (std::vector<int>{5}));
  gate->Open();
  EXPECT_CU(cuStreamSynchronize(a));
}

TEST_F(StreamTest, LegacyDefaultStreamWaitsForBlockingStreams) {
  Gate* gate = NewPinnedGate();
  CUdeviceptr log = NewLog();
  ASSERT_CU(cuCtxSynchronize());
  CUstream blocking;
  ASSERT_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  ASSERT_CU(LaunchBlock(gate, blocking));
  ASSERT_CU(LaunchAppend(log, 1, blocking));
  ASSERT_CU(LaunchAppend(log, 2, nullptr));  // legacy stream: after all blocking-stream work
  EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(nullptr));
  EXPECT_EQ(ReadLog(log), (std::vector<int>{1, 2}));
}

TEST_F(StreamTest, FreeAsyncIsStreamOrdered) {
  Gate* gate = NewPinnedGate();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::uint64_t base = 0, peak = 0, live = 0;
  ASSERT_EQ(simgpuGetPhysicalUsage(0, &base, &peak), 0);
  CUdeviceptr p = 0;
  ASSERT_CU(cuMemAllocAsync(&p, 1 << 20, s));
  ASSERT_CU(LaunchBlock(gate, s));
  ASSERT_CU(cuMemFreeAsync(p, s));
  ASSERT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  EXPECT_EQ(live, base + (1u << 20));  // the free waits behind the blocked kernel
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(s));
  ASSERT_EQ(simgpuGetPhysicalUsage(0, &live, &peak), 0);
  EXPECT_EQ(live, base);
  EXPECT_EQ(peak, base + (1u << 20));
}

void HostAppend(void* data) { static_cast<std::vector<int>*>(data)->push_back(3); }

TEST_F(StreamTest, HostFunctionRunsInStreamOrder) {
  Gate* gate = NewPinnedGate();
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<int> seen;
  ASSERT_CU(LaunchBlock(gate, s));
  ASSERT_CU(cuLaunchHostFunc(s, HostAppend, &seen));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  gate->Open();
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(seen, (std::vector<int>{3}));
}

TEST_F(StreamTest, CapturedGraphReplaysInOrder) {
  CUdeviceptr log = NewLog();
  ASSERT_CU(cuCtxSynchronize());
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  ASSERT_CU(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus status;
  ASSERT_CU(cuStreamIsCapturing(s, &status));
  EXPECT_EQ(status, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  ASSERT_CU(LaunchAppend(log, 7, s));
  ASSERT_CU(LaunchAppend(log, 8, s));
  CUgraph graph;
  ASSERT_CU(cuStreamEndCapture(s, &graph));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_TRUE(ReadLog(log).empty());  // captured, not executed
  CUgraphExec exec;
  ASSERT_CU(cuGraphInstantiate(&exec, graph, 0));
  ASSERT_CU(cuGraphLaunch(exec, s));
  ASSERT_CU(cuGraphLaunch(exec, s));
  ASSERT_CU(cuStreamSynchronize(s));
  EXPECT_EQ(ReadLog(log), (std::vector<int>{7, 8, 7, 8}));
  EXPECT_CU(cuGraphExecDestroy(exec));
  EXPECT_CU(cuGraphDestroy(graph));
}

TEST_F(StreamTest, DestroyedStreamIsRejectedButItsWorkCompletes) {
  CUdeviceptr log = NewLog();
  ASSERT_CU(cuCtxSynchronize());
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUevent e;
  ASSERT_CU(cuEventCreate(&e, 0));
  ASSERT_CU(LaunchAppend(log, 4, s));
  ASSERT_CU(cuEventRecord(e, s));
  ASSERT_CU(cuStreamDestroy(s));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_INVALID_HANDLE);
  ASSERT_CU(cuEventSynchronize(e));
  EXPECT_EQ(ReadLog(log), (std::vector<int>{4}));
}

TEST_F(StreamTest, PerThreadDefaultStreamIsSeparateFromLegacy) {
  Gate* gate = NewPinnedGate();
  ASSERT_CU(LaunchBlock(gate, CU_STREAM_PER_THREAD));
  EXPECT_EQ(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
  // The _ptsz entry point maps the null stream to the per-thread stream.
  void* fn = nullptr;
  ASSERT_CU(cuGetProcAddress("cuStreamQuery", &fn, CUDA_VERSION,
                             CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  auto query_ptsz = reinterpret_cast<CUresult (*)(CUstream)>(fn);
  EXPECT_EQ(query_ptsz(nullptr), CUDA_ERROR_NOT_READY);
  gate->Open();
  EXPECT_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  EXPECT_CU(query_ptsz(nullptr));
}

}  // namespace
}  // namespace simgpu_test

namespace simgpu_test {
namespace {

class CtxSyncTest : public SimgpuTest {
 protected:
  void SetUp() override { Init(); }
};

// cudaVersion 13000 hands out cuCtxSynchronize_v2(CUcontext); it must wait for every stream of
// the context whether it gets the context, null, or (from a caller using cuda.h's one-argument
// declaration) an arbitrary value.
TEST_F(CtxSyncTest, KernelThatThrowsIsStickyLaunchFailure) {
  ASSERT_CU(cuLaunchKernel(Fn("throw"), 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_LAUNCH_FAILED);
  CUdeviceptr p = 0;
  EXPECT_EQ(cuMemAlloc(&p, 16), CUDA_ERROR_LAUNCH_FAILED);
}

TEST_F(CtxSyncTest, ContextSynchronizeWaitsForAllStreams) {
  void* fn = nullptr;
  ASSERT_CU(cuGetProcAddress("cuCtxSynchronize", &fn, CUDA_VERSION, 0, nullptr));
  auto sync_v2 = reinterpret_cast<CUresult (*)(CUcontext)>(fn);
  for (CUcontext arg :
       {ctx_, static_cast<CUcontext>(nullptr), reinterpret_cast<CUcontext>(0x1234)}) {
    Gate* gate = NewPinnedGate();
    CUstream s;
    ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(LaunchBlock(gate, s));
    EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    gate->Open();
    ASSERT_CU(sync_v2(arg));
    EXPECT_CU(cuStreamQuery(s));
  }
}

}  // namespace
}  // namespace simgpu_test
