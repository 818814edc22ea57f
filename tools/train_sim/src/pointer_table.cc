#include "pointer_table.h"

#include <algorithm>

#include "chameleon/simgpu/pointer_table_kernel.h"

namespace chameleon::train_sim {
namespace {

const simgpu::KernelEntry kKernels[] = {simgpu::kGatherViaTableKernel};
const simgpu::ModuleImage kImage{simgpu::kModuleImageMagic, simgpu::kModuleImageVersion, 1, 0,
                                 kKernels};

constexpr std::uint64_t kMaxEntryBytes = 64;

}  // namespace

PointerTableGather::PointerTableGather(const DriverApi& api, Allocator& alloc, CUstream stream,
                                       const std::vector<Param>& params)
    : api_(api), alloc_(alloc), stream_(stream) {
  Check(api_, api_.cuModuleLoadData(&module_, &kImage), "cuModuleLoadData(pointer table)");
  Check(api_, api_.cuModuleGetFunction(&gather_, module_, simgpu::kGatherViaTableName),
        "cuModuleGetFunction(gather_via_table)");
  std::vector<CUdeviceptr> entries;
  entry_bytes_ = kMaxEntryBytes;
  for (const Param& p : params) {
    entries.push_back(p.value.ptr);
    entry_bytes_ = std::min<std::uint64_t>(entry_bytes_, p.value.bytes);
  }
  entries_ = entries.size();
  if (entries_ == 0) return;
  table_ = alloc_.Allocate(entries_ * sizeof(CUdeviceptr));
  out_ = alloc_.Allocate(entries_ * entry_bytes_);
  host_.resize(out_.bytes);
  // The weights were initialised on the stream: order the table after them, synchronously, so
  // the host vector may go out of scope.
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  Check(api_, api_.cuMemcpyHtoD(table_.ptr, entries.data(), table_.bytes),
        "cuMemcpyHtoD(pointer table)");
}

PointerTableGather::~PointerTableGather() = default;

void PointerTableGather::Launch() {
  if (entries_ == 0) return;
  CUdeviceptr table = table_.ptr, out = out_.ptr;
  std::uint64_t n = entries_, bytes = entry_bytes_;
  void* args[] = {&table, &n, &bytes, &out};
  Check(api_, api_.cuLaunchKernel(gather_, 1, 1, 1, 1, 1, 1, 0, stream_, args, nullptr),
        "cuLaunchKernel(gather_via_table)");
  Check(api_, api_.cuMemcpyDtoHAsync(host_.data(), out_.ptr, out_.bytes, stream_),
        "cuMemcpyDtoHAsync(gathered)");
}

void PointerTableGather::Fold() {
  for (unsigned char byte : host_) hash_ = (hash_ ^ byte) * 0x100000001b3ull;
}

void PointerTableGather::Release() {
  alloc_.Free(out_);
  alloc_.Free(table_);
  if (module_ != nullptr) api_.cuModuleUnload(module_);
  module_ = nullptr;
}

}  // namespace chameleon::train_sim
