#include "alloc_table.h"

#include <sys/mman.h>

#include <cstdlib>

namespace chameleon::shim {

std::uint64_t AllocationTable::NextVersion() {
  // One counter for every table of the process, so that a cache filled from one table never
  // matches another's version (tests build several tables).
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

AllocationTable::AllocationTable() {
  // Reserve every shard's array at once (lazily committed by the kernel as entries are written):
  // a growing array would have to be freed while readers may still look at it.
  const std::size_t bytes = sizeof(Entry) * kShardCapacity;
  for (Shard& shard : shards_) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) std::abort();  // at load time, with no memory there is nothing to do
    shard.entries = static_cast<Entry*>(p);
  }
}

bool AllocationTable::InsertInShard(Shard* shard, AllocationState* state) {
  const std::uint32_t n = shard->count.load(std::memory_order_relaxed);
  if (n >= kShardCapacity) return false;
  std::uint32_t pos = n;
  while (pos > 0 &&
         shard->entries[pos - 1].start.load(std::memory_order_relaxed) > state->address) {
    --pos;
  }
  // Odd: readers retry. Every entry store below is a release store, so none of them can become
  // visible before this one (plain moves on x86; and no fences, which TSan cannot model).
  shard->seq.fetch_add(1, std::memory_order_relaxed);
  for (std::uint32_t i = n; i > pos; --i) {
    Entry& dst = shard->entries[i];
    const Entry& src = shard->entries[i - 1];
    dst.start.store(src.start.load(std::memory_order_relaxed), std::memory_order_release);
    dst.end.store(src.end.load(std::memory_order_relaxed), std::memory_order_release);
    dst.info.store(src.info.load(std::memory_order_relaxed), std::memory_order_release);
    dst.state.store(src.state.load(std::memory_order_relaxed), std::memory_order_release);
  }
  shard->entries[pos].start.store(state->address, std::memory_order_release);
  shard->entries[pos].end.store(state->address + state->bytes, std::memory_order_release);
  shard->entries[pos].info.store((state->id << 16) | state->device, std::memory_order_release);
  shard->entries[pos].state.store(state, std::memory_order_release);
  shard->count.store(n + 1, std::memory_order_release);
  shard->seq.fetch_add(1, std::memory_order_release);  // even again: published
  return true;
}

bool AllocationTable::Insert(AllocationState* state) {
  if (state->bytes == 0) return false;
  std::lock_guard<std::mutex> lock(mu_);
  bool ok = true;
  ForEachShardOf(state->address, state->address + state->bytes, [&](Shard* shard) {
    if (ok && !InsertInShard(shard, state)) ok = false;
  });
  if (!ok) {
    // Undo partial inserts so the table never holds half an allocation.
    ForEachShardOf(state->address, state->address + state->bytes,
                   [&](Shard* shard) { RemoveFromShard(shard, state->address); });
    insert_failures_.fetch_add(1, std::memory_order_relaxed);
    BumpVersion();
    return false;
  }
  ++live_count_;
  BumpVersion();
  return true;
}

void AllocationTable::RemoveFromShard(Shard* shard, std::uint64_t start) {
  const std::uint32_t n = shard->count.load(std::memory_order_relaxed);
  std::uint32_t pos = 0;
  while (pos < n && shard->entries[pos].start.load(std::memory_order_relaxed) != start) ++pos;
  if (pos == n) return;
  shard->seq.fetch_add(1, std::memory_order_relaxed);  // odd; entry stores are release
  for (std::uint32_t i = pos; i + 1 < n; ++i) {
    Entry& dst = shard->entries[i];
    const Entry& src = shard->entries[i + 1];
    dst.start.store(src.start.load(std::memory_order_relaxed), std::memory_order_release);
    dst.end.store(src.end.load(std::memory_order_relaxed), std::memory_order_release);
    dst.info.store(src.info.load(std::memory_order_relaxed), std::memory_order_release);
    dst.state.store(src.state.load(std::memory_order_relaxed), std::memory_order_release);
  }
  shard->count.store(n - 1, std::memory_order_release);
  shard->seq.fetch_add(1, std::memory_order_release);
}

AllocationState* AllocationTable::Remove(std::uint64_t address) {
  std::lock_guard<std::mutex> lock(mu_);
  const Shard& shard = shards_[ShardOf(address >> kRegionShift)];
  AllocationState* state = nullptr;
  const std::uint32_t n = shard.count.load(std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < n; ++i) {
    if (shard.entries[i].start.load(std::memory_order_relaxed) == address) {
      state = shard.entries[i].state.load(std::memory_order_relaxed);
      break;
    }
  }
  if (state == nullptr) return nullptr;
  ForEachShardOf(state->address, state->address + state->bytes,
                 [&](Shard* s) { RemoveFromShard(s, state->address); });
  --live_count_;
  BumpVersion();
  return state;
}

void AllocationTable::RemoveRange(std::uint64_t begin, std::uint64_t end,
                                  std::vector<AllocationState*>* removed) {
  if (end <= begin) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<AllocationState*> found;
  ForEachShardOf(begin, end, [&](Shard* shard) {
    const std::uint32_t n = shard->count.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < n; ++i) {
      const std::uint64_t start = shard->entries[i].start.load(std::memory_order_relaxed);
      if (start >= begin && start < end) {
        AllocationState* s = shard->entries[i].state.load(std::memory_order_relaxed);
        if (std::find(found.begin(), found.end(), s) == found.end()) found.push_back(s);
      }
    }
  });
  std::sort(found.begin(), found.end(),
            [](const AllocationState* a, const AllocationState* b) { return a->id < b->id; });
  for (AllocationState* s : found) {
    ForEachShardOf(s->address, s->address + s->bytes,
                   [&](Shard* shard) { RemoveFromShard(shard, s->address); });
    --live_count_;
    removed->push_back(s);
  }
  if (!found.empty()) BumpVersion();
}

AllocationState* AllocationTable::NewState() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!free_states_.empty()) {
    AllocationState* s = free_states_.back();
    free_states_.pop_back();
    return s;
  }
  // Recycled, never freed while the table lives: type-stable for racing readers.
  all_states_.push_back(new AllocationState());
  return all_states_.back();
}

AllocationTable::~AllocationTable() {
  for (AllocationState* s : all_states_) delete s;
  for (Shard& shard : shards_) ::munmap(shard.entries, sizeof(Entry) * kShardCapacity);
}

void AllocationTable::Recycle(AllocationState* state) {
  state->flags.store(0, std::memory_order_relaxed);
  state->executor_slot.store(nullptr, std::memory_order_relaxed);
  state->last_stream.store(0, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  free_states_.push_back(state);
}

void AllocationTable::ClearForChild() {
  for (Shard& shard : shards_) {
    shard.count.store(0, std::memory_order_relaxed);
    shard.seq.store(0, std::memory_order_relaxed);
  }
  live_count_ = 0;
  BumpVersion();
}

}  // namespace chameleon::shim
