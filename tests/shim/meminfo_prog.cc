// cuMemGetInfo as a program sees it, before and after one allocation the swap executor serves
// (8 MiB) and one it passes through (64 KiB). Prints "meminfo <free> <total>" three times, then
// "pointer-stable 1" when data written through the executor allocation reads back. Run by
// shim_executor_test under LD_PRELOAD=libchameleon.so with and without CHAMELEON_DEVICE_LIMIT.
#include <cstdio>
#include <vector>

#include "sim_env.h"

namespace {

void PrintInfo() {
  size_t free_bytes = 0, total_bytes = 0;
  CHECK_CU(cuMemGetInfo(&free_bytes, &total_bytes));
  std::printf("meminfo %zu %zu\n", free_bytes, total_bytes);
}

}  // namespace

int main() {
  shim_test::Env env;
  env.Init();
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
