// fork under the shim, on the null driver (simgpu, like a real driver, is not usable in a forked
// child; the null driver is). The parent allocates, forks, the child reports what its shim sees,
// makes a tracked call (its shim re-registers with the daemon as a new client), and the parent
// carries on. Reaches the driver only through dlsym, so it links no libcuda.
#include <cuda.h>
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>

#include "chameleon/shim/shim_api.h"

namespace {

using AllocFn = CUresult (*)(CUdeviceptr*, size_t);
using FreeFn = CUresult (*)(CUdeviceptr);

ChameleonShimStats Stats() {
  ChameleonShimStats s{};
  auto fn =
      reinterpret_cast<ChameleonShimGetStatsFn>(dlsym(RTLD_DEFAULT, "chameleon_shim_get_stats"));
  if (fn != nullptr) fn(&s, sizeof(s));
  return s;
}

}  // namespace

int main() {
  auto alloc = reinterpret_cast<AllocFn>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  auto free_fn = reinterpret_cast<FreeFn>(dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
  if (alloc == nullptr || free_fn == nullptr) return 2;
  CUdeviceptr a = 0;
  if (alloc(&a, 1 << 20) != CUDA_SUCCESS) return 3;
  std::printf("alloc %llx %d\n", static_cast<unsigned long long>(a), 1 << 20);
  std::fflush(stdout);
  const pid_t child = fork();
  if (child == 0) {
    const ChameleonShimStats st = Stats();
    std::printf("forkchild pid=%d connected=%llu live=%llu\n", static_cast<int>(getpid()),
                static_cast<unsigned long long>(st.connected),
                static_cast<unsigned long long>(st.allocations_live));
    CUdeviceptr p = 0;
    const CUresult r = alloc(&p, 4096);
    const ChameleonShimStats after = Stats();
    std::printf("forkchild alloc=%d connected=%llu\n", static_cast<int>(r),
                static_cast<unsigned long long>(after.connected));
    std::fflush(stdout);
    free_fn(p);
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  if (free_fn(a) != CUDA_SUCCESS) return 4;
  std::printf("free %llx\n", static_cast<unsigned long long>(a));
  std::printf("done\n");
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 6;
}
