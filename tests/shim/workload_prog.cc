// The workload the shim's segment tests run under LD_PRELOAD=libchameleon.so. It prints, on
// stdout, every driver-visible event it causes (allocations, ops, frees, syncs) so the test can
// compare them with what the shim published. Scenarios:
//   ops N       N iterations; pauses after the first ("phase", waits for "go" and for the
//               shim to have applied a policy), then a graph capture at the end
//   checksum N  the same arithmetic, printing only a checksum (for with/without-shim diffs)
//   later       allocates, prints "ready", waits for "go" and for the shim to connect, then 2
//   iterations fork        forks after some work; the child reports what its shim sees and
//   re-registers dlsym       dlsym interposition checks
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "chameleon/shim/shim_api.h"
#include "sim_env.h"
#include "support/wait_for.h"

namespace {

using namespace shim_test;

constexpr int kFloats = 1 << 14;
constexpr size_t kBytes = kFloats * sizeof(float);
bool g_quiet = false;

void Say(const std::string& line) {
  if (!g_quiet) std::cout << line << std::endl;
}
std::string Hex(CUdeviceptr p) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%llx", static_cast<unsigned long long>(p));
  return buf;
}

ChameleonShimStats Stats() {
  ChameleonShimStats s{};
  auto fn =
      reinterpret_cast<ChameleonShimGetStatsFn>(dlsym(RTLD_DEFAULT, "chameleon_shim_get_stats"));
  if (fn != nullptr) fn(&s, sizeof(s));
  return s;
}

// Polls the shim's stats with a deadline (cross-thread state the program cannot wait on otherwise).
template <typename Pred>
bool WaitFor(Pred pred, int timeout_ms) {
  return chameleon::test_support::WaitFor([&] { return pred(Stats()); },
                                          std::chrono::milliseconds(timeout_ms),
                                          std::chrono::milliseconds(5));
}

struct Buffers {
  CUdeviceptr a = 0, b = 0, out = 0, va = 0;
  size_t va_bytes = 0;
  CUmemGenericAllocationHandle handle = 0;
  std::vector<float> host = std::vector<float>(kFloats, 1.0f);
};

void AllocPlain(CUdeviceptr* p) {
  CHECK_CU(cuMemAlloc(p, kBytes));
  Say("alloc " + Hex(*p) + " " + std::to_string(kBytes));
}

void AllocVmm(const Env& env, Buffers* b) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = env.dev;
  CHECK_CU(cuMemGetAllocationGranularity(&b->va_bytes, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  if (b->va_bytes < kBytes) b->va_bytes = kBytes;
  CHECK_CU(cuMemAddressReserve(&b->va, b->va_bytes, 0, 0, 0));
  CHECK_CU(cuMemCreate(&b->handle, b->va_bytes, &prop, 0));
  CHECK_CU(cuMemMap(b->va, b->va_bytes, 0, b->handle, 0));
  Say("alloc " + Hex(b->va) + " " + std::to_string(b->va_bytes));
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemSetAccess(b->va, b->va_bytes, &access, 1));
}

void Iteration(const Env& env, CUstream s, Buffers* b) {
  CUdeviceptr tmp = 0;
  CHECK_CU(cuMemAllocAsync(&tmp, kBytes, s));
  Say("alloc " + Hex(tmp) + " " + std::to_string(kBytes));
  CHECK_CU(cuMemcpyHtoDAsync(b->a, b->host.data(), kBytes, s));
  Say("copy 0 " + Hex(b->a) + " " + std::to_string(kBytes));
  CHECK_CU(cuMemsetD32Async(tmp, 0, kFloats, s));
  Say("memset " + Hex(tmp) + " " + std::to_string(kBytes));
  int n = kFloats;
  float half = 0.5f, two = 2.0f;
  void* axpy[] = {&b->b, &b->a, &n, &half};
  CHECK_CU(cuLaunchKernel(env.axpy, 1, 1, 1, 1, 1, 1, 0, s, axpy, nullptr));
  Say("launch axpy " + Hex(b->b) + " " + Hex(b->a));
  void* scale[] = {&b->b, &n, &two};
  CHECK_CU(cuLaunchKernel(env.scale, 1, 1, 1, 1, 1, 1, 0, s, scale, nullptr));
  Say("launch scale " + Hex(b->b));
  // Interior pointers count: the tensor is the allocation they fall in.
  CUdeviceptr b_mid = b->b + 64;
  void* sum3[] = {&b->out, &b->a, &b_mid, &b->va, &n};
  n = kFloats - 16;
  CHECK_CU(cuLaunchKernel(env.sum3, 1, 1, 1, 1, 1, 1, 0, s, sum3, nullptr));
  Say("launch sum3 " + Hex(b->out) + " " + Hex(b->a) + " " + Hex(b->b) + " " + Hex(b->va));
  CHECK_CU(cuMemcpyDtoHAsync(b->host.data(), b->out, kBytes, s));
  Say("copy " + Hex(b->out) + " 0 " + std::to_string(kBytes));
  CHECK_CU(cuMemFreeAsync(tmp, s));
  Say("free " + Hex(tmp));
  CHECK_CU(cuStreamSynchronize(s));
  Say("sync");
  // Keep the values bounded so every run prints the same checksum.
  for (float& v : b->host) v = std::fmod(v, 7.0f);
}

void Capture(const Env& env, Buffers* b) {
  CUstream s2;
  CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_RELAXED));
  int n = kFloats;
  float half = 0.5f, two = 2.0f;
  void* axpy[] = {&b->b, &b->a, &n, &half};
  CHECK_CU(cuLaunchKernel(env.axpy, 1, 1, 1, 1, 1, 1, 0, s2, axpy, nullptr));
  Say("captured axpy " + Hex(b->b) + " " + Hex(b->a));
  void* scale[] = {&b->b, &n, &two};
  CHECK_CU(cuLaunchKernel(env.scale, 1, 1, 1, 1, 1, 1, 0, s2, scale, nullptr));
  Say("captured scale " + Hex(b->b));
  CUgraph graph;
  CHECK_CU(cuStreamEndCapture(s2, &graph));
  CUgraphExec exec;
  CHECK_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CHECK_CU(cuGraphLaunch(exec, s2));
  Say("graphlaunch");
  CHECK_CU(cuStreamSynchronize(s2));
  Say("sync");
}

void FreeAll(Buffers* b) {
  for (CUdeviceptr p : {b->a, b->b, b->out}) {
    CHECK_CU(cuMemFree(p));
    Say("free " + Hex(p));
  }
  CHECK_CU(cuMemUnmap(b->va, b->va_bytes));
  Say("free " + Hex(b->va));
  CHECK_CU(cuMemRelease(b->handle));
  CHECK_CU(cuMemAddressFree(b->va, b->va_bytes));
}

double Checksum(const Buffers& b) {
  double sum = 0;
  for (float v : b.host) sum += v;
  return sum;
}

int RunOps(int iterations, bool pause) {
  Env env;
  env.Init();
  CUstream s;
  CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Buffers b;
  AllocPlain(&b.a);
  AllocPlain(&b.b);
  AllocPlain(&b.out);
  AllocVmm(env, &b);
  for (int it = 0; it < iterations; ++it) {
    if (pause && it == 1) {
      std::cout << "phase" << std::endl;
      std::string go;
      std::getline(std::cin, go);
      if (!WaitFor([](const ChameleonShimStats& st) { return st.policy_generation >= 1; }, 5000)) {
        std::cout << "nopolicy" << std::endl;
        return 4;
      }
    }
    Iteration(env, s, &b);
  }
  if (pause) Capture(env, &b);
  FreeAll(&b);
  std::cout << "checksum " << Checksum(b) << std::endl;
  std::cout << "done" << std::endl;
  return 0;
}

int RunLater() {
  Env env;
  env.Init();
  CUstream s;
  CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Buffers b;
  AllocPlain(&b.a);
  AllocPlain(&b.b);
  AllocPlain(&b.out);
  AllocVmm(env, &b);
  std::cout << "ready" << std::endl;
  std::string go;
  std::getline(std::cin, go);
  if (!WaitFor([](const ChameleonShimStats& st) { return st.connected == 1; }, 5000)) {
    std::cout << "notconnected" << std::endl;
    return 5;
  }
  std::cout << "connected" << std::endl;
  Iteration(env, s, &b);
  Iteration(env, s, &b);
  FreeAll(&b);
  std::cout << "done" << std::endl;
  return 0;
}

// The daemon disables this client between "phase" and "phase2": ops are not recorded then, but
// allocations and frees still are (the daemon's table must stay right).
int RunDisable() {
  Env env;
  env.Init();
  CUstream s;
  CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Buffers b;
  AllocPlain(&b.a);
  int n = kFloats;
  float two = 0.5f;
  void* scale[] = {&b.a, &n, &two};
  auto launch = [&](const char* tag) {
    CHECK_CU(cuLaunchKernel(env.scale, 1, 1, 1, 1, 1, 1, 0, s, scale, nullptr));
    Say(std::string(tag) + " scale " + Hex(b.a));
  };
  launch("launch");
  for (const char* phase : {"phase", "phase2"}) {
    const bool disabled = std::string(phase) == "phase";
    std::cout << phase << std::endl;
    std::string go;
    std::getline(std::cin, go);
    if (!WaitFor(
            [&](const ChameleonShimStats& st) {
              return st.daemon_disabled == (disabled ? 1u : 0u);
            },
            5000)) {
      std::cout << "nocontrol" << std::endl;
      return 7;
    }
    launch(disabled ? "unrecorded" : "launch");
    CUdeviceptr tmp;
    AllocPlain(&tmp);
    CHECK_CU(cuMemFree(tmp));
    Say("free " + Hex(tmp));
  }
  CHECK_CU(cuMemFree(b.a));
  Say("free " + Hex(b.a));
  std::cout << "done" << std::endl;
  return 0;
}

// Every way a launch can carry its arguments: kernelParams, a packed CU_LAUNCH_PARAM_BUFFER_POINTER
// buffer, cuLaunchKernelEx, and an interior pointer.
int RunLaunchForms() {
  Env env;
  env.Init();
  CUstream s;
  CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Buffers b;
  AllocPlain(&b.a);
  AllocPlain(&b.b);
  int n = 64;
  float half = 0.5f;
  void* params[] = {&b.b, &b.a, &n, &half};
  CHECK_CU(cuLaunchKernel(env.axpy, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
  Say("launch axpy " + Hex(b.b) + " " + Hex(b.a));
  // The packed layout of axpy: y at 0, x at 8, n at 16, a at 20.
  unsigned char buffer[24];
  CUdeviceptr x_mid = b.a + 256;
  std::memcpy(buffer, &b.b, 8);
  std::memcpy(buffer + 8, &x_mid, 8);
  std::memcpy(buffer + 16, &n, 4);
  std::memcpy(buffer + 20, &half, 4);
  size_t size = sizeof(buffer);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buffer, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CHECK_CU(cuLaunchKernel(env.axpy, 1, 1, 1, 1, 1, 1, 0, s, nullptr, extra));
  Say("launch axpy " + Hex(b.b) + " " + Hex(b.a));
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = config.blockDimZ = 1;
  config.hStream = s;
  void* same[] = {&b.a, &b.a, &n, &half};  // the same tensor twice: listed once
  CHECK_CU(cuLaunchKernelEx(&config, env.axpy, same, nullptr));
  Say("launch axpy " + Hex(b.a));
  CHECK_CU(cuStreamSynchronize(s));
  Say("sync");
  for (CUdeviceptr p : {b.a, b.b}) {
    CHECK_CU(cuMemFree(p));
    Say("free " + Hex(p));
  }
  std::cout << "done" << std::endl;
  return 0;
}

// The daemon drops the connection after "phase"; the shim reconnects (a second handshake) and
// the program carries on as if nothing happened.
int RunReconnect() {
  Env env;
  env.Init();
  CUstream s;
  CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Buffers b;
  AllocPlain(&b.a);
  std::cout << "phase" << std::endl;
  std::string go;
  std::getline(std::cin, go);
  if (!WaitFor([](const ChameleonShimStats& st) { return st.connects >= 2 && st.connected == 1; },
               10000)) {
    std::cout << "noreconnect" << std::endl;
    return 8;
  }
  int n = kFloats;
  float two = 2.0f;
  void* scale[] = {&b.a, &n, &two};
  CHECK_CU(cuLaunchKernel(env.scale, 1, 1, 1, 1, 1, 1, 0, s, scale, nullptr));
  Say("launch scale " + Hex(b.a));
  CHECK_CU(cuMemFree(b.a));
  Say("free " + Hex(b.a));
  std::cout << "done" << std::endl;
  return 0;
}

int RunDlsym() {
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    if (!ok) {
      std::cout << "FAIL " << what << std::endl;
      ++failures;
    }
  };
  void* wrapper = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
  check(wrapper != nullptr, "RTLD_DEFAULT lookup");
  // Looking up dlsym itself and calling through it (what cuDNN does) must not recurse.
  using DlsymFn = void* (*)(void*, const char*);
  auto self = reinterpret_cast<DlsymFn>(dlsym(RTLD_DEFAULT, "dlsym"));
  check(self != nullptr && self(RTLD_DEFAULT, "cuMemAlloc_v2") == wrapper, "dlsym via dlsym");
  check(dlsym(RTLD_NEXT, "cuMemAlloc_v2") == wrapper, "RTLD_NEXT driver lookup");
  // Non-driver names keep RTLD_NEXT semantics relative to the real caller.
  check(dlsym(RTLD_NEXT, "malloc") == dlvsym(RTLD_NEXT, "malloc", "GLIBC_2.2.5"),
        "RTLD_NEXT malloc");
  check(dlsym(RTLD_DEFAULT, "cuNoSuchFunction") == nullptr, "unknown cu name");
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  check(driver != nullptr && dlsym(driver, "cuMemAlloc_v2") == wrapper, "driver handle lookup");
  // An untracked driver entry passes through untouched: the driver's own function.
  auto real_dlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.34"));
  if (real_dlsym == nullptr)
    real_dlsym = reinterpret_cast<DlsymFn>(dlvsym(RTLD_DEFAULT, "dlsym", "GLIBC_2.2.5"));
  check(real_dlsym != nullptr && dlsym(driver, "cuDeviceGet") == real_dlsym(driver, "cuDeviceGet"),
        "untracked name passes through");
  Env env;
  env.Init();
  CUdeviceptr p = 0;
  check(reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(wrapper)(&p, 4096) == CUDA_SUCCESS,
        "call through looked-up wrapper");
  // A driver whose constructor re-entered the shim during its initialisation (see
  // reentrant_driver.cc) saw an error instead of a deadlock.
  if (const int* rc = static_cast<const int*>(dlsym(RTLD_DEFAULT, "chameleon_test_reentrant_rc"))) {
    std::cout << "reentrant rc " << *rc << std::endl;
  }
  std::cout << (failures == 0 ? "dlsym ok" : "dlsym failed") << std::endl;
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 3;
  if (scenario == "ops") return RunOps(iterations, true);
  if (scenario == "checksum") {
    g_quiet = true;
    return RunOps(iterations, false);
  }
  if (scenario == "later") return RunLater();
  if (scenario == "dlsym") return RunDlsym();
  if (scenario == "disable") return RunDisable();
  if (scenario == "launchforms") return RunLaunchForms();
  if (scenario == "reconnect") return RunReconnect();
  std::cerr << "usage: workload_prog ops|checksum|later|disable|dlsym [iterations]\n";
  return 2;
}
