// Best-fit block management inside device segments, the core of PyTorch-style caching.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <utility>

namespace chameleon::train_sim {

/// Free and used blocks of one pool (PyTorch keeps one for small and one for large requests).
/// Blocks split on allocation and merge with free neighbours of the same segment on release;
/// segments themselves are never merged. Not thread-safe.
class BlockPool {
 public:
  /// Adds [addr, addr + bytes) of `segment` as free memory (a new segment or a grown one).
  void AddFree(CUdeviceptr addr, std::size_t bytes, std::uint32_t segment);

  /// Best fit for `bytes`: the smallest free block that holds it. The remainder is split off as
  /// a free block when it is at least `min_split` bytes. nullopt when nothing fits.
  std::optional<CUdeviceptr> Take(std::size_t bytes, std::size_t min_split);

  /// Returns a block taken earlier; its size is remembered. False if `addr` is not a used block.
  bool Release(CUdeviceptr addr);

  /// Size of the free block that ends exactly at `end` in `segment`, or 0 (for growing a segment
  /// in place).
  std::size_t FreeTailBytes(CUdeviceptr end, std::uint32_t segment) const;

 private:
  struct Block {
    std::size_t bytes;
    std::uint32_t segment;
    bool free;
  };
  using BlockMap = std::map<CUdeviceptr, Block>;

  void InsertFree(CUdeviceptr addr, Block block);
  void EraseFree(BlockMap::iterator it);

  BlockMap blocks_;
  std::set<std::pair<std::size_t, CUdeviceptr>> free_by_size_;
};

}  // namespace chameleon::train_sim
