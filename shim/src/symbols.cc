#include "symbols.h"

#include <cstring>

namespace chameleon::shim {

const SymbolInfo kSymbols[kSymbolCount] = {
#define CHAMELEON_SYMBOL(name, base, version, per_thread) {#name, #base, version, per_thread != 0},
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
};

__thread ThreadCounters* t_counters __attribute__((tls_model("initial-exec"))) = nullptr;

namespace {
std::atomic<ThreadCounters*> g_counter_blocks{nullptr};
}  // namespace

ThreadCounters* RegisterThreadCounters() {
  auto* block = new ThreadCounters();
  for (auto& c : block->calls) c.store(0, std::memory_order_relaxed);
  ThreadCounters* head = g_counter_blocks.load(std::memory_order_relaxed);
  do {
    block->next = head;
  } while (!g_counter_blocks.compare_exchange_weak(head, block, std::memory_order_release,
                                                   std::memory_order_relaxed));
  t_counters = block;
  return block;
}

std::uint64_t TotalCalls(SymbolId id) {
  std::uint64_t total = 0;
  for (ThreadCounters* b = g_counter_blocks.load(std::memory_order_acquire); b != nullptr;
       b = b->next) {
    total += b->calls[id].load(std::memory_order_relaxed);
  }
  return total;
}

int FindSymbol(const char* name) {
  if (name == nullptr) return -1;
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    if (std::strcmp(kSymbols[i].name, name) == 0) return static_cast<int>(i);
  }
  return -1;
}

int SelectVersion(const char* base, int cuda_version, bool per_thread) {
  if (base == nullptr) return -1;
  int best = -1;
  bool found_flavour = false;
  // A base without a per-thread flavour (cuCtxSynchronize, cuMemCreate, ...) answers both.
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    if (std::strcmp(kSymbols[i].base, base) == 0 && kSymbols[i].per_thread == per_thread) {
      found_flavour = true;
    }
  }
  const bool want = found_flavour ? per_thread : false;
  for (std::uint32_t i = 0; i < kSymbolCount; ++i) {
    const SymbolInfo& s = kSymbols[i];
    if (s.per_thread != want || std::strcmp(s.base, base) != 0) continue;
    if (s.first_version > cuda_version) continue;
    if (best < 0 || s.first_version > kSymbols[best].first_version) best = static_cast<int>(i);
  }
  return best;
}

}  // namespace chameleon::shim
