#include "swap/discarder.h"

namespace chameleon::shim::swap {

bool Discarder::Discard(CUdeviceptr ptr, std::size_t bytes, CUstream stream) const {
  const DriverApi& api = *base_.api;
  if (api.mem_discard_async == nullptr || stream == nullptr || bytes == 0) return false;
  // Refused (a capturing stream, memory simgpu does not own): the bytes simply stay.
  if (api.mem_discard_async(ptr, bytes, stream) != CUDA_SUCCESS) return false;
  base_.counters->Add(base_.counters->discarded_bytes, bytes);
  return true;
}

void Discarder::StaleChunks(CUdeviceptr va, const std::vector<std::uint32_t>& chunks,
                            std::size_t first, std::size_t count, CUstream stream) const {
  if (base_.api->mem_discard_async == nullptr || stream == nullptr) return;
  ChunkPool& pool = *base_.chunks;
  const std::size_t chunk = pool.chunk_bytes();
  const std::size_t end = first + count < chunks.size() ? first + count : chunks.size();
  for (std::size_t i = first; i < end;) {
    if (!pool.stale(chunks[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < end && pool.stale(chunks[j])) ++j;
    if (Discard(va + i * chunk, (j - i) * chunk, stream)) {
      for (std::size_t k = i; k < j; ++k) pool.set_discarded(chunks[k]);
    }
    i = j;
  }
}

void Discarder::Overwritten(const std::vector<std::uint32_t>& chunks, std::size_t first,
                            std::size_t count) const {
  ChunkPool& pool = *base_.chunks;
  const std::size_t end = first + count < chunks.size() ? first + count : chunks.size();
  for (std::size_t i = first; i < end; ++i)
    if (pool.stale(chunks[i])) pool.set_discarded(chunks[i]);
}

void Discarder::Buffer(const void* ptr, std::size_t bytes, CUstream stream) const {
  Discard(reinterpret_cast<CUdeviceptr>(ptr), bytes, stream);
}

}  // namespace chameleon::shim::swap
