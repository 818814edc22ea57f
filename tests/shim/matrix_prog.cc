// The interception matrix: reaches every entry point libchameleon.so exports by direct link,
// by dlsym on the driver's handle, through cuGetProcAddress_v2 at three cudaVersions x flags
// 0/1/2, and through the legacy 4-argument cuGetProcAddress; then compares the shim's per-symbol
// call counts with simgpu's own. Prints one line per problem; exit 0 when there is none.
// Run by shim_interpose_test with LD_PRELOAD=libchameleon.so.
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "chameleon/simgpu/control.h"
#include "sim_env.h"

namespace {

using namespace shim_test;

struct SymbolRow {
  const char* name;
  const char* base;
  int first_version;
  bool per_thread;
};
const SymbolRow kRows[] = {
#define CHAMELEON_SYMBOL(name, base, version, pt) {#name, #base, version, pt != 0},
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
};

// Direct link: the address of each exported name as the dynamic linker bound it for us.
extern "C" {
#define CHAMELEON_SYMBOL(name, base, version, pt) void DirectRef_##name() __asm__(#name);
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
}
const std::map<std::string, void*> kDirect = {
#define CHAMELEON_SYMBOL(name, base, version, pt) \
  {#name, reinterpret_cast<void*>(&DirectRef_##name)},
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
};

int g_failures = 0;
void Fail(const std::string& what) {
  std::printf("FAIL %s\n", what.c_str());
  ++g_failures;
}

struct Res {
  Env env;
  CUstream s = nullptr;
  CUstream s2 = nullptr;
  CUdeviceptr d1 = 0, d2 = 0;
  std::vector<char> host = std::vector<char>(1 << 16);
  CUmemoryPool pool = nullptr;
  size_t granularity = 0;
  CUmemAllocationProp prop{};
  CUgraphExec exec = nullptr;
  size_t n = 1 << 16;
};

template <typename Fn>
Fn As(void* p) {
  return reinterpret_cast<Fn>(p);
}

void Launch(void* fn, Res& r) {
  int count = 1024;
  float a = 1.0f;
  void* params[] = {&r.d1, &r.d2, &count, &a};
  CHECK_CU(
      As<decltype(&cuLaunchKernel)>(fn)(r.env.axpy, 1, 1, 1, 1, 1, 1, 0, r.s, params, nullptr));
}

CUmemGenericAllocationHandle NewHandle(Res& r) {
  CUmemGenericAllocationHandle h = 0;
  CHECK_CU(cuMemCreate(&h, r.granularity, &r.prop, 0));
  return h;
}

using Invoke = std::function<void(void*, Res&)>;
std::map<std::string, Invoke> Invocations() {
  std::map<std::string, Invoke> m;
  m["cuMemAlloc"] = [](void* f, Res&) {
    CUdeviceptr p;
    CHECK_CU(As<decltype(&cuMemAlloc)>(f)(&p, 4096));
    CHECK_CU(cuMemFree(p));
  };
  m["cuMemAllocPitch"] = [](void* f, Res&) {
    CUdeviceptr p;
    size_t pitch;
    CHECK_CU(As<decltype(&cuMemAllocPitch)>(f)(&p, &pitch, 256, 4, 4));
    CHECK_CU(cuMemFree(p));
  };
  m["cuMemFree"] = [](void* f, Res&) {
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc(&p, 4096));
    CHECK_CU(As<decltype(&cuMemFree)>(f)(p));
  };
  m["cuMemAllocAsync"] = [](void* f, Res& r) {
    CUdeviceptr p;
    CHECK_CU(As<decltype(&cuMemAllocAsync)>(f)(&p, 4096, r.s));
    CHECK_CU(cuMemFreeAsync(p, r.s));
  };
  m["cuMemAllocFromPoolAsync"] = [](void* f, Res& r) {
    CUdeviceptr p;
    CHECK_CU(As<decltype(&cuMemAllocFromPoolAsync)>(f)(&p, 4096, r.pool, r.s));
    CHECK_CU(cuMemFreeAsync(p, r.s));
  };
  m["cuMemFreeAsync"] = [](void* f, Res& r) {
    CUdeviceptr p;
    CHECK_CU(cuMemAllocAsync(&p, 4096, r.s));
    CHECK_CU(As<decltype(&cuMemFreeAsync)>(f)(p, r.s));
  };
  m["cuMemCreate"] = [](void* f, Res& r) {
    CUmemGenericAllocationHandle h;
    CHECK_CU(As<decltype(&cuMemCreate)>(f)(&h, r.granularity, &r.prop, 0));
    CHECK_CU(cuMemRelease(h));
  };
  m["cuMemRelease"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemRelease)>(f)(NewHandle(r)));
  };
  auto map_cycle = [](Res& r, void* reserve, void* map, void* unmap, void* addr_free) {
    CUdeviceptr va;
    CHECK_CU(As<decltype(&cuMemAddressReserve)>(
        reserve ? reserve : reinterpret_cast<void*>(&cuMemAddressReserve))(&va, r.granularity, 0, 0,
                                                                           0));
    CUmemGenericAllocationHandle h = NewHandle(r);
    CHECK_CU(As<decltype(&cuMemMap)>(map ? map : reinterpret_cast<void*>(&cuMemMap))(
        va, r.granularity, 0, h, 0));
    CUmemAccessDesc access{};
    access.location = r.prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_CU(cuMemSetAccess(va, r.granularity, &access, 1));
    CHECK_CU(As<decltype(&cuMemUnmap)>(unmap ? unmap : reinterpret_cast<void*>(&cuMemUnmap))(
        va, r.granularity));
    CHECK_CU(cuMemRelease(h));
    CHECK_CU(As<decltype(&cuMemAddressFree)>(
        addr_free ? addr_free : reinterpret_cast<void*>(&cuMemAddressFree))(va, r.granularity));
  };
  m["cuMemAddressReserve"] = [=](void* f, Res& r) { map_cycle(r, f, nullptr, nullptr, nullptr); };
  m["cuMemMap"] = [=](void* f, Res& r) { map_cycle(r, nullptr, f, nullptr, nullptr); };
  m["cuMemUnmap"] = [=](void* f, Res& r) { map_cycle(r, nullptr, nullptr, f, nullptr); };
  m["cuMemAddressFree"] = [=](void* f, Res& r) { map_cycle(r, nullptr, nullptr, nullptr, f); };
  m["cuMemSetAccess"] = [](void* f, Res& r) {
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, r.granularity, 0, 0, 0));
    CUmemGenericAllocationHandle h = NewHandle(r);
    CHECK_CU(cuMemMap(va, r.granularity, 0, h, 0));
    CUmemAccessDesc access{};
    access.location = r.prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK_CU(As<decltype(&cuMemSetAccess)>(f)(va, r.granularity, &access, 1));
    CHECK_CU(cuMemUnmap(va, r.granularity));
    CHECK_CU(cuMemRelease(h));
    CHECK_CU(cuMemAddressFree(va, r.granularity));
  };
  m["cuMemGetAllocationPropertiesFromHandle"] = [](void* f, Res& r) {
    CUmemGenericAllocationHandle h = NewHandle(r);
    CUmemAllocationProp prop{};
    CHECK_CU(As<decltype(&cuMemGetAllocationPropertiesFromHandle)>(f)(&prop, h));
    CHECK_CU(cuMemRelease(h));
  };
  m["cuMemRetainAllocationHandle"] = [](void* f, Res& r) {
    CUmemGenericAllocationHandle h = 0;
    // simgpu does not implement it (NOT_SUPPORTED): only the call counts here.
    As<decltype(&cuMemRetainAllocationHandle)>(f)(&h, reinterpret_cast<void*>(r.d1));
  };
  m["cuMemGetInfo"] = [](void* f, Res&) {
    size_t free_bytes, total;
    CHECK_CU(As<decltype(&cuMemGetInfo)>(f)(&free_bytes, &total));
  };
  m["cuIpcGetMemHandle"] = [](void* f, Res& r) {
    CUipcMemHandle h;
    As<decltype(&cuIpcGetMemHandle)>(f)(&h, r.d1);  // simgpu may not support IPC; the call counts
  };
  m["cuMemExportToShareableHandle"] = [](void* f, Res& r) {
    CUmemGenericAllocationHandle h = NewHandle(r);
    int fd = -1;
    CHECK_CU(As<decltype(&cuMemExportToShareableHandle)>(f)(
        &fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    if (fd >= 0) ::close(fd);
    CHECK_CU(cuMemRelease(h));
  };
  m["cuLaunchKernel"] = Launch;
  m["cuLaunchKernelEx"] = [](void* f, Res& r) {
    int count = 1024;
    float a = 1.0f;
    void* params[] = {&r.d1, &r.d2, &count, &a};
    CUlaunchConfig config{};
    config.gridDimX = config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = config.blockDimY = config.blockDimZ = 1;
    config.hStream = r.s;
    CHECK_CU(As<decltype(&cuLaunchKernelEx)>(f)(&config, r.env.axpy, params, nullptr));
  };
  m["cuLaunchCooperativeKernel"] = [](void* f, Res& r) {
    int count = 1024;
    float a = 1.0f;
    void* params[] = {&r.d1, &r.d2, &count, &a};
    CHECK_CU(
        As<decltype(&cuLaunchCooperativeKernel)>(f)(r.env.axpy, 1, 1, 1, 1, 1, 1, 0, r.s, params));
  };
  m["cuGraphLaunch"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuGraphLaunch)>(f)(r.exec, r.s));
  };
  m["cuMemcpy"] = [](void* f, Res& r) { CHECK_CU(As<decltype(&cuMemcpy)>(f)(r.d2, r.d1, r.n)); };
  m["cuMemcpyAsync"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyAsync)>(f)(r.d2, r.d1, r.n, r.s));
  };
  m["cuMemcpyPeer"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyPeer)>(f)(r.d2, r.env.ctx, r.d1, r.env.ctx, r.n));
  };
  m["cuMemcpyPeerAsync"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyPeerAsync)>(f)(r.d2, r.env.ctx, r.d1, r.env.ctx, r.n, r.s));
  };
  m["cuMemcpyHtoD"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyHtoD)>(f)(r.d1, r.host.data(), r.n));
  };
  m["cuMemcpyDtoH"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyDtoH)>(f)(r.host.data(), r.d1, r.n));
  };
  m["cuMemcpyDtoD"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyDtoD)>(f)(r.d2, r.d1, r.n));
  };
  m["cuMemcpyHtoDAsync"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyHtoDAsync)>(f)(r.d1, r.host.data(), r.n, r.s));
    CHECK_CU(cuStreamSynchronize(r.s));
  };
  m["cuMemcpyDtoHAsync"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyDtoHAsync)>(f)(r.host.data(), r.d1, r.n, r.s));
    CHECK_CU(cuStreamSynchronize(r.s));
  };
  m["cuMemcpyDtoDAsync"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemcpyDtoDAsync)>(f)(r.d2, r.d1, r.n, r.s));
  };
  m["cuMemsetD8"] = [](void* f, Res& r) { CHECK_CU(As<decltype(&cuMemsetD8)>(f)(r.d1, 0, r.n)); };
  m["cuMemsetD16"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemsetD16)>(f)(r.d1, 0, r.n / 2));
  };
  m["cuMemsetD32"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemsetD32)>(f)(r.d1, 0, r.n / 4));
  };
  m["cuMemsetD8Async"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemsetD8Async)>(f)(r.d1, 0, r.n, r.s));
  };
  m["cuMemsetD16Async"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemsetD16Async)>(f)(r.d1, 0, r.n / 2, r.s));
  };
  m["cuMemsetD32Async"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuMemsetD32Async)>(f)(r.d1, 0, r.n / 4, r.s));
  };
  m["cuStreamSynchronize"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuStreamSynchronize)>(f)(r.s));
  };
  m["cuCtxSynchronize"] = [](void* f, Res& r) {
    // Two ABIs share this base: cuCtxSynchronize(void) and CUDA 13's cuCtxSynchronize_v2(ctx).
    // Calling the void form with an extra argument is harmless on x86-64; the v2 form gets ctx.
    CHECK_CU(reinterpret_cast<CUresult (*)(CUcontext)>(f)(r.env.ctx));
  };
  m["cuStreamBeginCapture"] = [](void* f, Res& r) {
    CHECK_CU(
        As<CUresult (*)(CUstream, CUstreamCaptureMode)>(f)(r.s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    Launch(reinterpret_cast<void*>(&cuLaunchKernel), r);  // on r.s: not captured
    CUgraph g;
    CHECK_CU(cuStreamEndCapture(r.s2, &g));
    CHECK_CU(cuGraphDestroy(g));
  };
  m["cuStreamBeginCaptureToGraph"] = [](void* f, Res& r) {
    // A graph to capture into, made by an (empty) ordinary capture.
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture(r.s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(cuStreamEndCapture(r.s2, &g));
    const CUresult rc = As<CUresult (*)(CUstream, CUgraph, const CUgraphNode*,
                                        const CUgraphEdgeData*, size_t, CUstreamCaptureMode)>(f)(
        r.s2, g, nullptr, nullptr, 0, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (rc == CUDA_SUCCESS) {  // the simulator may not support capturing into a graph
      CUgraph out;
      CHECK_CU(cuStreamEndCapture(r.s2, &out));
    }
    CHECK_CU(cuGraphDestroy(g));
  };
  m["cuStreamEndCapture"] = [](void* f, Res& r) {
    CHECK_CU(cuStreamBeginCapture(r.s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUgraph g;
    CHECK_CU(As<decltype(&cuStreamEndCapture)>(f)(r.s2, &g));
    CHECK_CU(cuGraphDestroy(g));
  };
  m["cuCtxSetCurrent"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuCtxSetCurrent)>(f)(r.env.ctx));
  };
  m["cuCtxPushCurrent"] = [](void* f, Res& r) {
    CHECK_CU(As<decltype(&cuCtxPushCurrent)>(f)(r.env.ctx));
    CUcontext popped;
    CHECK_CU(cuCtxPopCurrent(&popped));
  };
  m["cuCtxPopCurrent"] = [](void* f, Res& r) {
    CHECK_CU(cuCtxPushCurrent(r.env.ctx));
    CUcontext popped;
    CHECK_CU(As<decltype(&cuCtxPopCurrent)>(f)(&popped));
  };
  // cuCtxCreate has three ABIs: keyed by exported name, not by base.
  // The simulator may not create extra contexts; the call is counted either way.
  auto finish_create = [](Res& r, CUresult rc, CUcontext created) {
    if (rc == CUDA_SUCCESS) CHECK_CU(cuCtxDestroy(created));
    CHECK_CU(cuCtxSetCurrent(r.env.ctx));
  };
  m["cuCtxCreate_v2"] = [=](void* f, Res& r) {
    CUcontext c = nullptr;
    finish_create(r, As<CUresult (*)(CUcontext*, unsigned, CUdevice)>(f)(&c, 0, r.env.dev), c);
  };
  m["cuCtxCreate_v3"] = [=](void* f, Res& r) {
    CUcontext c = nullptr;
    const CUresult rc = As<CUresult (*)(CUcontext*, CUexecAffinityParam*, int, unsigned, CUdevice)>(
        f)(&c, nullptr, 0, 0, r.env.dev);
    finish_create(r, rc, c);
  };
  m["cuCtxCreate_v4"] = [=](void* f, Res& r) {
    CUcontext c = nullptr;
    const CUresult rc = As<CUresult (*)(CUcontext*, CUctxCreateParams*, unsigned, CUdevice)>(f)(
        &c, nullptr, 0, r.env.dev);
    finish_create(r, rc, c);
  };
  m["cuCtxDestroy"] = [](void* f, Res& r) {
    CUcontext c = nullptr;
    if (cuCtxCreate(&c, nullptr, 0, r.env.dev) != CUDA_SUCCESS) c = nullptr;
    As<decltype(&cuCtxDestroy)>(f)(c);  // with a null context when the simulator made none
    CHECK_CU(cuCtxSetCurrent(r.env.ctx));
  };
  m["cuGetProcAddress"] = [](void* f, Res&) {
    // Both ABIs: the 5-argument form ignores nothing; the 4-argument one ignores the 5th.
    void* p = nullptr;
    CUdriverProcAddressQueryResult status{};
    CHECK_CU(As<decltype(&cuGetProcAddress_v2)>(f)("cuMemAlloc", &p, 12000, 0, &status));
  };
  return m;
}

const SymbolRow* Row(const std::string& name) {
  for (const SymbolRow& row : kRows) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

void Exercise(const std::map<std::string, void*>& api, Res& r, const std::string& phase) {
  static const std::map<std::string, Invoke> invocations = Invocations();
  for (const auto& [name, fn] : api) {
    if (fn == nullptr) {
      Fail(phase + ": no pointer for " + name);
      continue;
    }
    auto it = invocations.find(name);
    if (it == invocations.end()) it = invocations.find(Row(name)->base);
    if (it == invocations.end()) {
      Fail(phase + ": no invocation for " + name);
      continue;
    }
    it->second(fn, r);
  }
  CHECK_CU(cuCtxSynchronize());
}

// Which exported entry a driver should hand out for (base, version, flags): written here
// independently of the shim's own table.
const char* Expected(const char* base, int version, cuuint64_t flags) {
  bool has_pt = false;
  for (const SymbolRow& row : kRows) {
    if (std::strcmp(row.base, base) == 0 && row.per_thread) has_pt = true;
  }
  const bool want_pt = has_pt && flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
  const SymbolRow* best = nullptr;
  for (const SymbolRow& row : kRows) {
    if (std::strcmp(row.base, base) != 0 || row.per_thread != want_pt) continue;
    if (row.first_version > version) continue;
    if (best == nullptr || row.first_version > best->first_version) best = &row;
  }
  return best ? best->name : nullptr;
}

void ProcAddressPhase(Res& r, int version, cuuint64_t flags, bool legacy) {
  const std::string phase = std::string(legacy ? "cuGetProcAddress" : "cuGetProcAddress_v2") +
                            " v" + std::to_string(version) + " flags " + std::to_string(flags);
  std::map<std::string, void*> api;
  std::vector<std::string> bases;
  for (const SymbolRow& row : kRows) {
    if (std::find(bases.begin(), bases.end(), row.base) == bases.end()) bases.push_back(row.base);
  }
  for (const std::string& base : bases) {
    void* p = nullptr;
    CUresult rc;
    if (legacy) {
      rc = As<CUresult (*)(const char*, void**, int, cuuint64_t)>(kDirect.at("cuGetProcAddress"))(
          base.c_str(), &p, version, flags);
    } else {
      CUdriverProcAddressQueryResult status{};
      rc = cuGetProcAddress_v2(base.c_str(), &p, version, flags, &status);
    }
    const char* expected = Expected(base.c_str(), version, flags);
    if (expected == nullptr) continue;  // not available at this version: nothing to check
    if (rc != CUDA_SUCCESS || p == nullptr) {
      Fail(phase + ": " + base + " not found");
      continue;
    }
    void* wrapper = dlsym(RTLD_DEFAULT, expected);
    if (p != wrapper) {
      Fail(phase + ": " + base + " did not return the shim's " + expected);
      continue;
    }
    api[expected] = p;
  }
  Exercise(api, r, phase);
}

}  // namespace

int main() {
  Res r;
  r.env.Init();
  CHECK_CU(cuStreamCreate(&r.s, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuStreamCreate(&r.s2, CU_STREAM_NON_BLOCKING));
  CHECK_CU(cuMemAlloc(&r.d1, r.n));
  CHECK_CU(cuMemAlloc(&r.d2, r.n));
  CHECK_CU(cuDeviceGetDefaultMemPool(&r.pool, r.env.dev));
  r.prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  r.prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  r.prop.location.id = r.env.dev;
  r.prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CHECK_CU(
      cuMemGetAllocationGranularity(&r.granularity, &r.prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  {
    CUgraph g;
    CHECK_CU(cuStreamBeginCapture(r.s2, CU_STREAM_CAPTURE_MODE_RELAXED));
    int count = 16;
    float a = 2.0f;
    void* params[] = {&r.d1, &r.d2, &count, &a};
    CHECK_CU(cuLaunchKernel(r.env.axpy, 1, 1, 1, 1, 1, 1, 0, r.s2, params, nullptr));
    CHECK_CU(cuStreamEndCapture(r.s2, &g));
    CHECK_CU(cuGraphInstantiateWithFlags(&r.exec, g, 0));
  }

  // 1. Direct link.
  Exercise(kDirect, r, "direct");
  // 2. dlsym on the driver's own handle.
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  if (driver == nullptr) Fail("libcuda.so.1 is not loaded");
  std::map<std::string, void*> by_dlsym;
  for (const SymbolRow& row : kRows) {
    void* p = dlsym(driver, row.name);
    if (p != kDirect.at(row.name)) Fail(std::string("dlsym did not return the shim's ") + row.name);
    by_dlsym[row.name] = p;
  }
  Exercise(by_dlsym, r, "dlsym");
  // 3. cuGetProcAddress_v2, three versions x three flag values; 4. the legacy form.
  for (int version : {11080, 12040, 13000}) {
    for (cuuint64_t flags : {0ull, 1ull, 2ull}) ProcAddressPhase(r, version, flags, false);
  }
  ProcAddressPhase(r, 12000, 0, true);
  ProcAddressPhase(r, 12000, 2, true);

  // Counts: the shim forwarded every call to the same-named driver entry, exactly once.
  auto shim_count = reinterpret_cast<std::uint64_t (*)(const char*)>(
      dlsym(RTLD_DEFAULT, "chameleon_shim_call_count"));
  auto sim_count =
      reinterpret_cast<std::uint64_t (*)(const char*)>(dlsym(RTLD_DEFAULT, "simgpuGetCallCount"));
  if (shim_count == nullptr || sim_count == nullptr) {
    Fail("chameleon_shim_call_count or simgpuGetCallCount missing (run with the shim preloaded)");
  } else {
    for (const SymbolRow& row : kRows) {
      const std::uint64_t ours = shim_count(row.name);
      const std::uint64_t theirs = sim_count(row.name);
      std::printf("count %-34s shim %6llu simgpu %6llu\n", row.name,
                  static_cast<unsigned long long>(ours), static_cast<unsigned long long>(theirs));
      if (ours != theirs) Fail(std::string("count mismatch for ") + row.name);
      if (ours == 0) Fail(std::string("never reached: ") + row.name);
    }
  }
  std::printf("%s (%d failures)\n", g_failures == 0 ? "PASS" : "FAILED", g_failures);
  return g_failures == 0 ? 0 : 1;
}
