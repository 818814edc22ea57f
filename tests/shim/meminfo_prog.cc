// cuMemGetInfo as a program sees it, before and after one allocation the swap executor serves
// (8 MiB) and one it passes through (64 KiB). Prints "meminfo <free> <total>" three times, then
// "pointer-stable 1" when data written through the executor allocation reads back. Run by
// shim_executor_test under LD_PRELOAD=libchameleon.so with and without CHAMELEON_DEVICE_LIMIT.
//
// `meminfo_prog other-device` (SIMGPU_DEVICES=2, a 32 MiB limit): four 8 MiB allocations on
// device 0 fill the executor's pool to the limit and are freed (their ranges stay cached), then
// 16 MiB is allocated and freed on device 1, which the executor does not serve; prints
// "other-device ok".
#include <cstdio>
#include <string>
#include <vector>

#include "sim_env.h"

namespace {

void PrintInfo() {
  size_t free_bytes = 0, total_bytes = 0;
  CHECK_CU(cuMemGetInfo(&free_bytes, &total_bytes));
  std::printf("meminfo %zu %zu\n", free_bytes, total_bytes);
}

int OtherDevice() {
  CUdeviceptr on0[4] = {};
  for (CUdeviceptr& p : on0) CHECK_CU(cuMemAlloc(&p, 8u << 20));
  for (CUdeviceptr p : on0) CHECK_CU(cuMemFree(p));
  CUdevice dev1 = 0;
  CUcontext ctx1 = nullptr;
  CHECK_CU(cuDeviceGet(&dev1, 1));
  CHECK_CU(cuDevicePrimaryCtxRetain(&ctx1, dev1));
  CHECK_CU(cuCtxSetCurrent(ctx1));
  CUdeviceptr on1 = 0;
  CHECK_CU(cuMemAlloc(&on1, 16u << 20));
  CHECK_CU(cuMemFree(on1));
  std::printf("other-device ok\n");
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  shim_test::Env env;
  env.Init();
  if (argc > 1 && std::string(argv[1]) == "other-device") return OtherDevice();
  PrintInfo();
  CUdeviceptr big = 0, small = 0;
  CHECK_CU(cuMemAlloc(&big, 8u << 20));
  PrintInfo();
  CHECK_CU(cuMemAlloc(&small, 64u << 10));
  PrintInfo();
  std::vector<unsigned> in(2u << 20), out(2u << 20);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned>(i * 2654435761u);
  CHECK_CU(cuMemcpyHtoD(big, in.data(), 8u << 20));
  CHECK_CU(cuMemcpyDtoH(out.data(), big, 8u << 20));
  std::printf("pointer-stable %d\n", in == out ? 1 : 0);
  CHECK_CU(cuMemFree(small));
  CHECK_CU(cuMemFree(big));
  PrintInfo();
  std::fflush(stdout);
  return 0;
}
