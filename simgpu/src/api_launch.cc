// Modules (simgpu images, see module_image.h) and kernel launches.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "api.h"
#include "module.h"

using namespace chameleon::simgpu;

namespace chameleon::simgpu {
Function* AsFunction(CUfunction f) {
  auto* fn = reinterpret_cast<Function*>(f);
  if (!fn || fn->magic.load(std::memory_order_acquire) != kFunctionMagic) return nullptr;
  return fn;
}
}  // namespace chameleon::simgpu

namespace {

// Modules are never freed (stale handles stay readable); this keeps them reachable.
std::mutex g_modules_mu;
std::vector<Module*>* g_modules = new std::vector<Module*>;

bool ValidImage(const ModuleImage* img) {
  if (img->magic != kModuleImageMagic) return false;
  if (img->version != kModuleImageVersion && img->version != 1) return false;
  if (img->kernel_count > 65536 || (img->kernel_count && !img->kernels)) return false;
  for (std::uint32_t i = 0; i < img->kernel_count; ++i) {
    const KernelEntry& k = img->kernels[i];
    if (!k.name || !k.fn || k.param_count > kMaxKernelParams) return false;
    for (std::uint32_t p = 0; p < k.param_count; ++p) {
      const std::uint64_t end = std::uint64_t{k.params[p].offset} + k.params[p].size;
      if (k.params[p].size == 0 || end > kMaxParamBytes) return false;
    }
  }
  return true;
}

// True if `addr` is mapped in this process at all (one mincore call).
bool Mapped(std::uintptr_t addr) {
  static const std::uintptr_t page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  if (addr < page || addr > 0x00007fffffffffffull) return false;
  unsigned char vec = 0;
  return mincore(reinterpret_cast<void*>(addr & ~(page - 1)), 1, &vec) == 0;
}

struct ArgCheck {
  bool host_memory = false;  ///< some argument is pinned host memory (host-link bandwidth)
  bool illegal = false;      ///< some argument is ordinary host memory
};

// The host-pointer rule (docs/simgpu.md): every pointer-sized argument whose value lies in this
// process's address space must be simulated device memory or pinned/mapped host memory.
ArgCheck CheckArgs(const Function& fn, const std::uint8_t* buf) {
  ArgCheck r;
  const Registry& reg = TheDriver()->registry;
  for (std::uint32_t i = 0; i < fn.entry->param_count; ++i) {
    const ParamLayout& p = fn.entry->params[i];
    if (p.size != sizeof(std::uintptr_t)) continue;
    std::uintptr_t v;
    std::memcpy(&v, buf + p.offset, sizeof v);
    if (v == 0) continue;
    int device = -1;
    Place place = reg.Classify(v, &device);
    if (place == Place::kPinnedHost) r.host_memory = true;
    if (place == Place::kPageableHost && Mapped(v)) r.illegal = true;
  }
  return r;
}

CUresult PackParams(const Function& fn, void** params, void** extra, std::uint8_t* buf) {
  const std::uint32_t n = fn.entry->param_count;
  if (params) {
    for (std::uint32_t i = 0; i < n; ++i) {
      if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
      std::memcpy(buf + fn.entry->params[i].offset, params[i], fn.entry->params[i].size);
    }
    return CUDA_SUCCESS;
  }
  if (extra) {
    const void* src = nullptr;
    std::size_t size = 0;
    for (int i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (i > 64) return CUDA_ERROR_INVALID_VALUE;  // unterminated list
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
        src = extra[i + 1];
      } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1]) {
        size = *static_cast<std::size_t*>(extra[i + 1]);
      } else {
        return CUDA_ERROR_INVALID_VALUE;
      }
    }
    if (!src || size < fn.param_bytes) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(buf, src, fn.param_bytes);
    return CUDA_SUCCESS;
  }
  return n == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

struct PackedArgs {
  std::vector<std::uint8_t> buf;
  std::vector<void*> ptrs;
};

// A version-1 image's cost function returns the two-field struct (a different return ABI), so
// it is called through its real type.
KernelCost CostOf(const Function& fn, void* const* params, const LaunchDims& dims) {
  if (fn.module->image->version == 1) {
    // Through void(*)(), the one type GCC's -Wcast-function-type lets any function pointer use.
    const auto v1 = reinterpret_cast<KernelCostFnV1>(reinterpret_cast<void (*)()>(fn.entry->cost));
    const KernelCostV1 c = v1(params, dims);
    return {c.flops, c.bytes, 0};
  }
  return fn.entry->cost(params, dims);
}

CUresult Launch(CUfunction f, const LaunchDims& dims, CUstream h, void** params, void** extra,
                bool pt) {
  Stream* s = nullptr;
  SIMGPU_TRY(ResolveStream(h, pt, &s));
  Function* fn = AsFunction(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  for (int i = 0; i < 3; ++i)
    if (dims.grid[i] == 0 || dims.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (std::uint64_t{dims.block[0]} * dims.block[1] * dims.block[2] > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;
  auto args = std::make_shared<PackedArgs>();
  args->buf.assign(std::max<std::uint32_t>(fn->param_bytes, 1), 0);
  SIMGPU_TRY(PackParams(*fn, params, extra, args->buf.data()));
  for (std::uint32_t i = 0; i < fn->entry->param_count; ++i)
    args->ptrs.push_back(args->buf.data() + fn->entry->params[i].offset);
  const ArgCheck check = CheckArgs(*fn, args->buf.data());
  const Config& cfg = TheDriver()->config;
  OpSpec op;
  op.cost.kind = OpCost::Kind::kKernel;
  if (fn->entry->cost) {
    const KernelCost c = CostOf(*fn, args->ptrs.data(), dims);
    const double bw = check.host_memory ? cfg.host_link_bandwidth() : cfg.hbm_bandwidth;
    op.cost.compute_ns =
        std::max({c.flops / cfg.peak_flops, c.bytes / bw, c.link_bytes / cfg.peer_link_bandwidth}) *
        1e9;
  }
  if (check.illegal) op.fail = CUDA_ERROR_ILLEGAL_ADDRESS;
  const KernelHostFn body = fn->entry->fn;
  op.work = [body, args, dims] { body(args->ptrs.data(), dims); };
  return s->Submit(std::move(op));
}

LaunchDims Dims(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                unsigned shared) {
  return LaunchDims{{gx, gy, gz}, {bx, by, bz}, shared};
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                  bool pt) {
  if (!config) return CUDA_ERROR_INVALID_VALUE;
  if (config->numAttrs && !config->attrs) return CUDA_ERROR_INVALID_VALUE;
  return Launch(f,
                Dims(config->gridDimX, config->gridDimY, config->gridDimZ, config->blockDimX,
                     config->blockDimY, config->blockDimZ, config->sharedMemBytes),
                config->hStream, params, extra, pt);
}

}  // namespace

SIMGPU_API CUresult cuModuleLoadData(CUmodule* module, const void* image) try {
  SIMGPU_ENTRY();
  Context* ctx = nullptr;
  SIMGPU_TRY(CurrentContext(&ctx));
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  const auto* img = static_cast<const ModuleImage*>(image);
  if (!ValidImage(img)) return CUDA_ERROR_INVALID_IMAGE;
  auto* m = new Module;
  m->image = img;
  m->count = img->kernel_count;
  m->functions = std::make_unique<Function[]>(m->count);
  for (std::uint32_t i = 0; i < m->count; ++i) {
    Function& fn = m->functions[i];
    fn.entry = &img->kernels[i];
    fn.module = m;
    for (std::uint32_t p = 0; p < fn.entry->param_count; ++p)
      fn.param_bytes =
          std::max(fn.param_bytes, fn.entry->params[p].offset + fn.entry->params[p].size);
  }
  {
    std::lock_guard lock(g_modules_mu);
    g_modules->push_back(m);
  }
  *module = reinterpret_cast<CUmodule>(m);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuModuleUnload(CUmodule h) try {
  SIMGPU_ENTRY();
  auto* m = reinterpret_cast<Module*>(h);
  if (!m || m->magic.load() != kModuleMagic) return CUDA_ERROR_INVALID_HANDLE;
  SynchronizeAll();  // launched kernels may still reference the image's functions
  for (std::uint32_t i = 0; i < m->count; ++i) m->functions[i].magic.store(0);
  m->magic.store(0);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule h, const char* name) try {
  SIMGPU_ENTRY();
  auto* m = reinterpret_cast<Module*>(h);
  if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!m || m->magic.load() != kModuleMagic) return CUDA_ERROR_INVALID_HANDLE;
  for (std::uint32_t i = 0; i < m->count; ++i) {
    if (std::strcmp(m->functions[i].entry->name, name) == 0) {
      *f = reinterpret_cast<CUfunction>(&m->functions[i]);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuFuncGetName(const char** name, CUfunction f) try {
  SIMGPU_ENTRY();
  Function* fn = AsFunction(f);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  *name = fn->entry->name;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuFuncGetParamInfo(CUfunction f, size_t index, size_t* offset,
                                       size_t* size) try {
  SIMGPU_ENTRY();
  Function* fn = AsFunction(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (index >= fn->entry->param_count) return CUDA_ERROR_INVALID_VALUE;
  if (offset) *offset = fn->entry->params[index].offset;
  if (size) *size = fn->entry->params[index].size;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attrib, CUfunction f) try {
  SIMGPU_ENTRY();
  Function* fn = AsFunction(f);
  if (!fn) return CUDA_ERROR_INVALID_HANDLE;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *value = 32;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *value = 80;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = 166912;
      break;
    default:
      *value = 0;
      break;
  }
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute, int) try {
  SIMGPU_ENTRY();
  return AsFunction(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuFuncSetCacheConfig(CUfunction f, CUfunc_cache) try {
  SIMGPU_ENTRY();
  return AsFunction(f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                   unsigned int bx, unsigned int by, unsigned int bz,
                                   unsigned int shared, CUstream s, void** params,
                                   void** extra) try {
  SIMGPU_ENTRY();
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, params, extra, false);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                        unsigned int gz, unsigned int bx, unsigned int by,
                                        unsigned int bz, unsigned int shared, CUstream s,
                                        void** params, void** extra) try {
  SIMGPU_ENTRY();
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, params, extra, true);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                     void** extra) try {
  SIMGPU_ENTRY();
  return LaunchEx(config, f, params, extra, false);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                          void** extra) try {
  SIMGPU_ENTRY();
  return LaunchEx(config, f, params, extra, true);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                              unsigned int gz, unsigned int bx, unsigned int by,
                                              unsigned int bz, unsigned int shared, CUstream s,
                                              void** params) try {
  SIMGPU_ENTRY();
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, params, nullptr, false);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                   unsigned int gz, unsigned int bx,
                                                   unsigned int by, unsigned int bz,
                                                   unsigned int shared, CUstream s,
                                                   void** params) try {
  SIMGPU_ENTRY();
  return Launch(f, Dims(gx, gy, gz, bx, by, bz, shared), s, params, nullptr, true);
}
SIMGPU_CATCH
