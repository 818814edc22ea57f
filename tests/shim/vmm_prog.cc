// The program's own VMM (cuMemCreate / cuMemMap, like PyTorch's expandable segments) under the
// swap executor. Run by shim_program_vmm_test with `vmm_prog <scenario>` under
// LD_PRELOAD=libchameleon.so and CHAMELEON_DEVICE_LIMIT; prints result lines the test checks.
//   span      a tensor over two adjacent mappings, its later page swapped out, scaled by one
//             launch naming its first page only: "span ok" when every element is right
//   remap     cuMemUnmap with the handle alive, then cuMemMap elsewhere: the contents survive
//             (resident, and swapped out); release-then-unmap and retain: "remap ok"
//   export    an exportable handle passes through (exports), a virtualised one does not
//   errors    one line per misuse with the result code (compared with the plain driver's)
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim_env.h"

namespace {

constexpr std::size_t kMiB = 1u << 20;

CUmemAllocationProp DeviceProp() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

CUmemGenericAllocationHandle Create(std::size_t bytes) {
  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  CHECK_CU(cuMemCreate(&h, bytes, &prop, 0));
  return h;
}

void Access(CUdeviceptr va, std::size_t bytes) {
  CUmemAccessDesc access{};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = 0;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CHECK_CU(cuMemSetAccess(va, bytes, &access, 1));
}

std::vector<float> Pattern(std::size_t bytes, int seed) {
  std::vector<float> v(bytes / sizeof(float));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + seed) % 1000);
  return v;
}

bool Matches(CUdeviceptr va, const std::vector<float>& want, float factor) {
  std::vector<float> got(want.size());
  CHECK_CU(cuMemcpyDtoH(got.data(), va, got.size() * sizeof(float)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (got[i] != want[i] * factor) return false;
  }
  return true;
}

// Allocates and frees `bytes` through cuMemAlloc: under a tight limit, evicts the resident
// executor allocation closest in size; the sync lets the executor unmap the evicted range.
void Pressure(std::size_t bytes) {
  CUdeviceptr d = 0;
  CHECK_CU(cuMemAlloc(&d, bytes));
  CHECK_CU(cuMemsetD8(d, 0, bytes));
  CHECK_CU(cuMemFree(d));
  CHECK_CU(cuCtxSynchronize());
}

// Limit 8 MiB: page A (2 MiB) and page B (4 MiB) mapped back to back; a 4 MiB cuMemAlloc evicts
// B (closest size). `scale` names A only but scales all 6 MiB.
int Span(shim_test::Env& env) {
  CUdeviceptr va = 0;
  CHECK_CU(cuMemAddressReserve(&va, 6 * kMiB, 0, 0, 0));
  const CUmemGenericAllocationHandle a = Create(2 * kMiB), b = Create(4 * kMiB);
  CHECK_CU(cuMemMap(va, 2 * kMiB, 0, a, 0));
  CHECK_CU(cuMemMap(va + 2 * kMiB, 4 * kMiB, 0, b, 0));
  Access(va, 6 * kMiB);
  const std::vector<float> data = Pattern(6 * kMiB, 1);
  CHECK_CU(cuMemcpyHtoD(va, data.data(), 6 * kMiB));
  Pressure(4 * kMiB);
  int n = static_cast<int>(data.size());
  float factor = 2.0f;
  void* params[] = {&va, &n, &factor};
  CHECK_CU(cuLaunchKernel(env.scale, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  CHECK_CU(cuCtxSynchronize());
  std::printf("span %s\n", Matches(va, data, 2.0f) ? "ok" : "bad");
  CHECK_CU(cuMemUnmap(va, 2 * kMiB));
  CHECK_CU(cuMemUnmap(va + 2 * kMiB, 4 * kMiB));
  CHECK_CU(cuMemRelease(a));
  CHECK_CU(cuMemRelease(b));
  CHECK_CU(cuMemAddressFree(va, 6 * kMiB));
  return 0;
}

// Limit 6 MiB. Both orders of unmap and release, remapping a live handle (its contents
// resident, then swapped out), and a retained handle.
int Remap() {
  CUdeviceptr r1 = 0, r2 = 0;
  CHECK_CU(cuMemAddressReserve(&r1, 4 * kMiB, 0, 0, 0));
  CHECK_CU(cuMemAddressReserve(&r2, 4 * kMiB, 0, 0, 0));
  bool ok = true;
  // Unmap, then map the live handle elsewhere: resident contents move with it.
  const CUmemGenericAllocationHandle h = Create(4 * kMiB);
  CHECK_CU(cuMemMap(r1, 4 * kMiB, 0, h, 0));
  Access(r1, 4 * kMiB);
  const std::vector<float> one = Pattern(4 * kMiB, 3);
  CHECK_CU(cuMemcpyHtoD(r1, one.data(), 4 * kMiB));
  CHECK_CU(cuMemUnmap(r1, 4 * kMiB));
  CHECK_CU(cuMemMap(r2, 4 * kMiB, 0, h, 0));
  Access(r2, 4 * kMiB);
  ok = ok && Matches(r2, one, 1.0f);
  // Swapped out (a 4 MiB allocation evicts it), unmapped, mapped back at r1: still there.
  Pressure(4 * kMiB);
  CHECK_CU(cuMemUnmap(r2, 4 * kMiB));
  CHECK_CU(cuMemMap(r1, 4 * kMiB, 0, h, 0));
  Access(r1, 4 * kMiB);
  ok = ok && Matches(r1, one, 1.0f);
  // A retained handle is the mapped one; each reference is released once.
  CUmemGenericAllocationHandle retained = 0;
  CHECK_CU(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(r1 + 4096)));
  ok = ok && retained == h;
  CHECK_CU(cuMemRelease(retained));
  // Release first: the mapping stays usable until it is unmapped.
  CHECK_CU(cuMemRelease(h));
  ok = ok && Matches(r1, one, 1.0f);
  CHECK_CU(cuMemUnmap(r1, 4 * kMiB));
  ok = ok && cuMemRelease(h) != CUDA_SUCCESS;  // gone
  // Unmap first, then release: nothing left behind (the limit holds 4 MiB again).
  const CUmemGenericAllocationHandle g = Create(4 * kMiB);
  CHECK_CU(cuMemMap(r2, 4 * kMiB, 0, g, 0));
  Access(r2, 4 * kMiB);
  CHECK_CU(cuMemUnmap(r2, 4 * kMiB));
  CHECK_CU(cuMemRelease(g));
  CUdeviceptr big = 0;
  CHECK_CU(cuMemAlloc(&big, 4 * kMiB));  // fits only if g's memory went back (limit 6 MiB)
  CHECK_CU(cuMemFree(big));
  CHECK_CU(cuMemAddressFree(r1, 4 * kMiB));
  CHECK_CU(cuMemAddressFree(r2, 4 * kMiB));
  std::printf("remap %s\n", ok ? "ok" : "bad");
  return 0;
}

int Export() {
  CUmemAllocationProp prop = DeviceProp();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUmemGenericAllocationHandle shareable = 0;
  CHECK_CU(cuMemCreate(&shareable, 2 * kMiB, &prop, 0));
  int fd = -1;
  const CUresult exported =
      cuMemExportToShareableHandle(&fd, shareable, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  CUmemAllocationProp got{};
  CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got, shareable));
  std::printf("export shareable %d fd %d types %d\n", static_cast<int>(exported), fd >= 0 ? 1 : 0,
              static_cast<int>(got.requestedHandleTypes));
  const CUmemGenericAllocationHandle plain = Create(2 * kMiB);
  int fd2 = -1;
  const CUresult refused =
      cuMemExportToShareableHandle(&fd2, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
  CUmemAllocationProp got2{};
  CHECK_CU(cuMemGetAllocationPropertiesFromHandle(&got2, plain));
  std::printf("export plain %s location %d/%d size-ok\n",
              refused == CUDA_SUCCESS ? "exported" : "refused",
              static_cast<int>(got2.location.type), got2.location.id);
  CHECK_CU(cuMemRelease(shareable));
  CHECK_CU(cuMemRelease(plain));
  return 0;
}

void Line(const char* what, CUresult r) { std::printf("%s %d\n", what, static_cast<int>(r)); }

// Misuse, each answered as the driver would: the test compares these lines with the plain run.
int Errors() {
  const std::size_t g = 2 * kMiB;
  CUdeviceptr va = 0, other = 0, gone = 0;
  CHECK_CU(cuMemAddressReserve(&va, 2 * g, 0, 0, 0));
  CHECK_CU(cuMemAddressReserve(&gone, g, 0, 0, 0));
  CHECK_CU(cuMemAddressFree(gone, g));
  const CUmemGenericAllocationHandle h = Create(g);
  Line("map-bogus-handle",
       cuMemMap(va, g, 0, static_cast<CUmemGenericAllocationHandle>(0xdead0), 0));
  Line("release-bogus-handle", cuMemRelease(static_cast<CUmemGenericAllocationHandle>(0xdead0)));
  Line("map-flags", cuMemMap(va, g, 0, h, 1));
  Line("map-unaligned", cuMemMap(va + 4096, g, 0, h, 0));
  Line("map-too-large", cuMemMap(va, 2 * g, 0, h, 0));
  Line("map-unreserved", cuMemMap(gone, g, 0, h, 0));
  Line("setaccess-unmapped", [&] {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(va, g, &access, 1);
  }());
  Line("map", cuMemMap(va, g, 0, h, 0));
  const CUmemGenericAllocationHandle h2 = Create(g);
  Line("map-over-mapping", cuMemMap(va, g, 0, h2, 0));
  Line("setaccess-null-desc", cuMemSetAccess(va, g, nullptr, 1));
  Line("setaccess-past-mapping", [&] {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(va, 2 * g, &access, 1);
  }());
  Line("props-null", cuMemGetAllocationPropertiesFromHandle(nullptr, h));
  Line("unmap-partial", cuMemUnmap(va, g / 2));
  Line("unmap-past-mapping", cuMemUnmap(va, 2 * g));
  Line("addressfree-mapped", cuMemAddressFree(va, 2 * g));
  Line("unmap", cuMemUnmap(va, g));
  Line("unmap-again", cuMemUnmap(va, g));
  Line("release", cuMemRelease(h));
  Line("release-again", cuMemRelease(h));
  Line("map-released", cuMemMap(va, g, 0, h, 0));
  Line("release-h2", cuMemRelease(h2));
  CHECK_CU(cuMemAddressFree(va, 2 * g));
  (void)other;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: vmm_prog span|remap|export|errors\n");
    return 2;
  }
  shim_test::Env env;
  env.Init();
  const std::string what = argv[1];
  int rc = 2;
  if (what == "span") rc = Span(env);
  if (what == "remap") rc = Remap();
  if (what == "export") rc = Export();
  if (what == "errors") rc = Errors();
  std::fflush(stdout);
  return rc;
}
