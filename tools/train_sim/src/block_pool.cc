#include "block_pool.h"

namespace chameleon::train_sim {

void BlockPool::AddFree(CUdeviceptr addr, std::size_t bytes, std::uint32_t segment) {
  InsertFree(addr, Block{bytes, segment, true});
}

std::optional<CUdeviceptr> BlockPool::Take(std::size_t bytes, std::size_t min_split) {
  auto fit = free_by_size_.lower_bound({bytes, 0});
  if (fit == free_by_size_.end()) return std::nullopt;
  const CUdeviceptr addr = fit->second;
  free_by_size_.erase(fit);
  Block& block = blocks_.at(addr);
  block.free = false;
  const std::size_t remainder = block.bytes - bytes;
  if (remainder > 0 && remainder >= min_split) {
    block.bytes = bytes;
    InsertFree(addr + bytes, Block{remainder, block.segment, true});
  }
  return addr;
}

bool BlockPool::Release(CUdeviceptr addr) {
  auto it = blocks_.find(addr);
  if (it == blocks_.end() || it->second.free) return false;
  Block block = it->second;
  block.free = true;
  blocks_.erase(it);
  InsertFree(addr, block);
  return true;
}

std::size_t BlockPool::FreeTailBytes(CUdeviceptr end, std::uint32_t segment) const {
  auto it = blocks_.lower_bound(end);
  if (it == blocks_.begin()) return 0;
  --it;
  const Block& block = it->second;
  if (!block.free || block.segment != segment || it->first + block.bytes != end) return 0;
  return block.bytes;
}

// Inserts a free block, first absorbing free neighbours of the same segment so that free space
// is always maximal (as PyTorch's allocator merges on free).
void BlockPool::InsertFree(CUdeviceptr addr, Block block) {
  auto next = blocks_.lower_bound(addr);
  if (next != blocks_.end() && next->second.free && next->second.segment == block.segment &&
      addr + block.bytes == next->first) {
    block.bytes += next->second.bytes;
    EraseFree(next);
  }
  auto prev = blocks_.lower_bound(addr);
  if (prev != blocks_.begin()) {
    --prev;
    if (prev->second.free && prev->second.segment == block.segment &&
        prev->first + prev->second.bytes == addr) {
      addr = prev->first;
      block.bytes += prev->second.bytes;
      EraseFree(prev);
    }
  }
  blocks_[addr] = block;
  free_by_size_.insert({block.bytes, addr});
}

void BlockPool::EraseFree(BlockMap::iterator it) {
  free_by_size_.erase({it->second.bytes, it->first});
  blocks_.erase(it);
}

}  // namespace chameleon::train_sim
