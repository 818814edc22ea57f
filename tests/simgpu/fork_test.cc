// fork() after the driver has run work: the child gets fresh stream workers (CUDA itself does not
// support this; the shim's tests and tools fork, so simgpu must not hang there). Unlabelled: TSan
// does not support threads started after a multi-threaded fork.
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"

namespace simgpu_test {
namespace {

class ForkTest : public SimgpuTest {
 protected:
  void SetUp() override { Init(); }
};

// The child's exit code: 0 = its kernel ran and its synchronisation returned.
int ChildLaunchesAndSynchronises(CUfunction append, CUstream s, CUdeviceptr log) {
  int value = 7;
  void* args[] = {&log, &value};
  if (cuLaunchKernel(append, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr) != CUDA_SUCCESS) return 1;
  if (cuStreamSynchronize(s) != CUDA_SUCCESS) return 2;
  if (cuCtxSynchronize() != CUDA_SUCCESS) return 3;
  int n = 0;
  if (cuMemcpyDtoH(&n, log, sizeof n) != CUDA_SUCCESS) return 4;
  return n == 2 ? 0 : 5;  // the parent's entry plus the child's own
}

TEST_F(ForkTest, ChildCanLaunchAndSynchronise) {
  CUdeviceptr log = 0;
  ASSERT_CU(cuMemAlloc(&log, 4096));
  CUstream s;
  ASSERT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Zero the log on `s` itself: cuMemsetD8 would run on the legacy stream, which a non-blocking
  // stream is not ordered with, so it could land after the appends and wipe the log.
  ASSERT_CU(cuMemsetD8Async(log, 0, 4096, s));
  ASSERT_CU(LaunchAppend(log, 1, s));
  ASSERT_CU(cuStreamSynchronize(s));
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(ChildLaunchesAndSynchronises(Fn("append"), s, log));
  int status = -1;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The parent is unaffected: its own stream still works, and its log holds only its own two
  // entries (device memory is private to each process after fork, as host memory is).
  ASSERT_CU(LaunchAppend(log, 2, s));
  ASSERT_CU(cuStreamSynchronize(s));
  int n = 0;
  ASSERT_CU(cuMemcpyDtoH(&n, log, sizeof n));
  EXPECT_EQ(n, 2);
}

}  // namespace
}  // namespace simgpu_test
