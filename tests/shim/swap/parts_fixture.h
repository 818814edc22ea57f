// Test fixture for the swap engine's parts (shim/src/swap/*.h) on simgpu: builds the same stack
// SwapEngine::Init builds — pools, mapper, table, free ranges, unmap batcher, transfers,
// evictor, allocator, host mapper, residency, adopted ranges — without the facade, so that each
// part's test drives its part directly and looks at the state the facade hides.
#pragma once

#include <memory>
#include <vector>

#include "sim_fixture.h"
#include "swap/adopted_ranges.h"
#include "swap/allocation_table.h"
#include "swap/allocator.h"
#include "swap/evictor.h"
#include "swap/free_range_cache.h"
#include "swap/host_mapper.h"
#include "swap/host_pool.h"
#include "swap/release_all.h"
#include "swap/residency_manager.h"
#include "swap/transfer_scheduler.h"
#include "swap/unmap_batcher.h"
#include "swap/va_mapper.h"

namespace swap_test {

inline std::uint64_t Count(const std::atomic<std::uint64_t>& c) { return c.load(); }

class PartsFixture : public SwapFixture {
 protected:
  static constexpr std::size_t kChunk = 2 * kMiB;  // simgpu's VMM granularity

  /// Builds the parts (call from the test body). `limit`: the chunk pool's cap.
  void StartParts(std::uint64_t limit = UINT64_MAX, std::uint64_t host_cap = UINT64_MAX) {
    ASSERT_CU(api_.stream_create(&in_, CU_STREAM_NON_BLOCKING));
    ASSERT_CU(api_.stream_create(&out_, CU_STREAM_NON_BLOCKING));
    fences_ = std::make_unique<sw::FencePool>(&api_);
    chunks_ = std::make_unique<sw::ChunkPool>(&api_, fences_.get(), &counters_, 0, kChunk, limit);
    host_ = std::make_unique<sw::HostPool>(&api_, &counters_, host_cap, fences_.get());
    vmm_ = std::make_unique<sw::VaMapper>(&api_, chunks_.get(), &counters_, 0);
    base_ = sw::SwapBase{&api_, fences_.get(), chunks_.get(), vmm_.get(), &counters_};
    free_ranges_ = std::make_unique<sw::FreeRangeCache>(base_);
    unmaps_ = std::make_unique<sw::UnmapBatcher>(base_, &table_, free_ranges_.get());
    destinations_ =
        std::make_unique<sw::Destinations>(base_, host_.get(), 0, sw::PlacementMode::kAuto, true);
    transfers_ = std::make_unique<sw::TransferScheduler>(base_, in_, out_, destinations_.get(),
                                                         unmaps_.get());
    evictor_ = std::make_unique<sw::Evictor>(base_, &table_, transfers_.get(), unmaps_.get(),
                                             free_ranges_.get());
    allocator_ = std::make_unique<sw::Allocator>(base_, &table_, free_ranges_.get(), unmaps_.get(),
                                                 transfers_.get(), evictor_.get());
    host_maps_ = std::make_unique<sw::HostMapper>(base_, unmaps_.get(), transfers_.get());
    residency_ = std::make_unique<sw::ResidencyManager>(
        base_, false, &table_, unmaps_.get(), transfers_.get(), evictor_.get(), host_maps_.get());
    adopted_ =
        std::make_unique<sw::AdoptedRanges>(base_, &table_, allocator_.get(), unmaps_.get(),
                                            transfers_.get(), host_maps_.get(), residency_.get());
  }

  void TearDown() override {
    if (!fences_) return;
    // As ~SwapEngine: the device idle, every range unmapped, then the pools.
    EXPECT_CU(ctx_sync_());
    unmaps_->Flush(/*all=*/true);
    free_ranges_->Drop();
    sw::ReleaseAllAllocations(table_, *vmm_, *transfers_, *fences_);
    destinations_.reset();
    host_.reset();
    chunks_.reset();
    fences_.reset();
  }

  /// An allocation made by the Allocator, filled with `seed` on compute_.
  sw::Allocation* NewFilled(std::size_t bytes, std::uint32_t seed) {
    CUdeviceptr p = 0;
    sw::AllocId id = 0;
    EXPECT_CU(allocator_->Allocate(bytes, compute_, &p, &id, nullptr));
    EXPECT_CU(Fill(p, bytes, seed, compute_));
    return table_.Get(id);
  }
  /// Mismatches of `bytes` at `p` against `seed`, read on compute_ after a device sync.
  std::uint64_t Mismatches(CUdeviceptr p, std::size_t bytes, std::uint32_t seed) {
    EXPECT_CU(Check(p, bytes, seed, compute_, 1));
    EXPECT_CU(ctx_sync_());
    return results_[1];
  }
  /// Mismatches of a host buffer against `seed`.
  static std::uint64_t HostMismatches(const void* host, std::size_t bytes, std::uint32_t seed) {
    const auto* w = static_cast<const std::uint32_t*>(host);
    std::uint64_t bad = 0;
    for (std::size_t i = 0; i < bytes / 4; ++i) bad += w[i] != Pattern(seed, i);
    return bad;
  }

  CUstream in_ = nullptr, out_ = nullptr;
  std::unique_ptr<sw::FencePool> fences_;
  std::unique_ptr<sw::ChunkPool> chunks_;
  std::unique_ptr<sw::HostPool> host_;
  std::unique_ptr<sw::VaMapper> vmm_;
  sw::SwapBase base_;
  sw::AllocationTable table_;
  std::unique_ptr<sw::FreeRangeCache> free_ranges_;
  std::unique_ptr<sw::UnmapBatcher> unmaps_;
  std::unique_ptr<sw::Destinations> destinations_;
  std::unique_ptr<sw::TransferScheduler> transfers_;
  std::unique_ptr<sw::Evictor> evictor_;
  std::unique_ptr<sw::Allocator> allocator_;
  std::unique_ptr<sw::HostMapper> host_maps_;
  std::unique_ptr<sw::ResidencyManager> residency_;
  std::unique_ptr<sw::AdoptedRanges> adopted_;
};

}  // namespace swap_test
