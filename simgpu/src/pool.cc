// Stream-ordered reuse in memory pools. A cuMemFreeAsync'd block stays charged until its stream
// reaches the free; an allocation later on the same stream is ordered after that free, so it may
// take the block's bytes over at once (as CUDA's pools do), and the free then uncharges only what
// nobody took. simgpu backs the new allocation with fresh host memory instead of the same bytes:
// work still queued before the free keeps its mapping, so no data hazard is possible, while the
// physical accounting is that of a pool that reuses (and coalesces) freed memory perfectly.
// Entries fully taken over are dropped at once, so the per-pool list stays short (frees not yet
// matched by later allocations) and is simply scanned.
#include <algorithm>
#include <tuple>
#include <vector>

#include "memory.h"
#include "stream.h"

namespace chameleon::simgpu {
namespace {

std::mutex g_pools_mu;
std::vector<MemPool*>* g_pools = new std::vector<MemPool*>;  // created pools; never freed

}  // namespace

std::uint64_t MemPool::AddPending(Device* dev, Stream* s, std::uint64_t bytes,
                                  std::uint32_t epoch) {
  std::lock_guard lock(mu_);
  PendingFree f;
  f.id = next_id_++;
  f.stream = s;
  f.bytes = bytes;
  f.epoch = epoch;
  pending_.push_back(f);
  dev->pending_free.fetch_add(bytes);
  return f.id;
}

void MemPool::Publish(std::uint64_t id, std::uint64_t seq, std::uint64_t vtime) {
  std::lock_guard lock(mu_);
  for (auto& f : pending_) {
    if (f.id != id) continue;
    f.seq = seq;
    f.vtime = vtime;
    f.published = true;
    return;
  }  // not found: the worker already executed the free (or it was fully taken over)
}

void MemPool::CompletePending(Device* dev, std::uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](auto& f) { return f.id == id; });
  if (it == pending_.end()) return;  // fully taken over, or a replayed graph node
  dev->Uncharge(it->bytes, it->epoch);
  used.fetch_sub(it->bytes);
  dev->pending_free.fetch_sub(it->bytes);
  pending_.erase(it);
}

bool MemPool::ChargeStreamOrdered(Device* dev, Stream* s, std::uint64_t bytes) {
  std::lock_guard lock(mu_);
  std::uint64_t reusable = 0;
  for (auto& f : pending_)
    if (f.published && f.stream == s) reusable += f.bytes;
  const std::uint64_t take = std::min(reusable, bytes);
  if (!dev->Charge(bytes - take)) return false;
  // Newest frees first: the older ones are the first the worker will complete anyway.
  std::uint64_t left = take;
  for (auto it = pending_.end(); left > 0 && it != pending_.begin();) {
    --it;
    if (!it->published || it->stream != s) continue;
    const std::uint64_t n = std::min(left, it->bytes);
    it->bytes -= n;
    left -= n;
    if (it->bytes == 0) it = pending_.erase(it);
  }
  used.fetch_sub(take);  // the allocation adds its whole size again
  dev->pending_free.fetch_sub(take);
  return true;
}

bool MemPool::WaitForOtherStreams(Stream* s) {
  std::vector<std::tuple<Stream*, std::uint64_t, std::uint64_t>> waits;
  {
    std::lock_guard lock(mu_);
    for (auto& f : pending_)
      if (f.published && f.stream != s) waits.emplace_back(f.stream, f.seq, f.vtime);
  }
  for (auto& [stream, seq, vtime] : waits) {
    stream->WaitFor(seq);
    HostClock().RaiseTo(vtime);
  }
  return !waits.empty();
}

void RegisterPool(MemPool* pool) {
  std::lock_guard lock(g_pools_mu);
  g_pools->push_back(pool);
}

bool WaitForPendingFrees(int device, Stream* except) {
  std::vector<MemPool*> pools{DefaultPool(device)};
  {
    std::lock_guard lock(g_pools_mu);
    for (MemPool* p : *g_pools)
      if (p->device == device) pools.push_back(p);
  }
  bool waited = false;
  for (MemPool* p : pools) waited = p->WaitForOtherStreams(except) || waited;
  return waited;
}

}  // namespace chameleon::simgpu
