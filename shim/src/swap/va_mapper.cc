#include "swap/va_mapper.h"

namespace chameleon::shim::swap {

CUresult VaMapper::Map(CUdeviceptr va, const std::vector<std::uint32_t>& chunks) {
  const std::size_t chunk = chunk_bytes();
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    counters_->Vmm(counters_->vmm_maps);
    const CUresult r = api_->mem_map(va + i * chunk, chunk, 0, chunks_->handle(chunks[i]), 0);
    if (r != CUDA_SUCCESS) {
      if (i > 0) Unmap(va, i * chunk);
      return r;
    }
  }
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = device_;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  counters_->Vmm(counters_->vmm_maps);
  const CUresult r = api_->mem_set_access(va, chunks.size() * chunk, &access, 1);
  if (r != CUDA_SUCCESS) Unmap(va, chunks.size() * chunk);
  return r;
}

CUresult VaMapper::Unmap(CUdeviceptr va, std::size_t span) {
  counters_->Vmm(counters_->vmm_unmaps);
  counters_->Add(counters_->unmaps);
  return api_->mem_unmap(va, span);
}

CUresult VaMapper::Reserve(CUdeviceptr* va, std::size_t span) {
  counters_->Vmm(counters_->vmm_reserves);
  return api_->mem_address_reserve(va, span, chunk_bytes(), 0, 0);
}

void VaMapper::FreeAddress(CUdeviceptr va, std::size_t span) {
  counters_->Vmm(counters_->vmm_reserves);
  api_->mem_address_free(va, span);
}

}  // namespace chameleon::shim::swap
