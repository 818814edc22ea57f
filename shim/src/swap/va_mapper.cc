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
  if (r != CUDA_SUCCESS) {
    Unmap(va, chunks.size() * chunk);
    return r;
  }
  // A range unmapped behind our back (not through Unmap) maps nothing any more.
  Forget(va, chunks.size() * chunk);
  auto& held = mapped_[va];
  held.reserve(chunks.size());
  for (const std::uint32_t c : chunks) {
    chunks_->AddMapping(c);
    held.emplace_back(c, chunks_->handle(c));
  }
  return r;
}

CUresult VaMapper::Unmap(CUdeviceptr va, std::size_t span) {
  counters_->Vmm(counters_->vmm_unmaps);
  counters_->Add(counters_->unmaps);
  Forget(va, span);
  return api_->mem_unmap(va, span);
}

void VaMapper::Forget(CUdeviceptr va, std::size_t span) {
  auto it = mapped_.lower_bound(va);
  while (it != mapped_.end() && it->first < va + span) {
    for (const auto& [chunk, handle] : it->second) chunks_->DropMapping(chunk, handle);
    it = mapped_.erase(it);
  }
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
