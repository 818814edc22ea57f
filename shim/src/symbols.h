// The table of driver entry points the shim exports (symbols.inc), their per-symbol call
// counters and the addresses of our wrappers. Thread-safe: everything here is immutable after
// static initialisation except the relaxed atomic counters.
#pragma once

#include <atomic>
#include <cstdint>

namespace chameleon::shim {

enum SymbolId : std::uint32_t {
#define CHAMELEON_SYMBOL(name, base, version, per_thread) kSym_##name,
#include "symbols.inc"
#undef CHAMELEON_SYMBOL
  kSymbolCount
};

/// Static facts about one exported entry point.
struct SymbolInfo {
  const char* name;   ///< exported (and real-driver) symbol name
  const char* base;   ///< name cuGetProcAddress is asked for
  int first_version;  ///< first cudaVersion with this ABI
  bool per_thread;    ///< _ptds/_ptsz flavour
};

extern const SymbolInfo kSymbols[kSymbolCount];

/// Our wrapper's address for each symbol (what dlsym/cuGetProcAddress hand out).
void* WrapperAddress(SymbolId id);

/// Index of an exported name, or -1. Slow path (linear over ~70 names); never on a launch.
int FindSymbol(const char* name);

/// Picks the tracked entry cuGetProcAddress should return for `base` at `cuda_version` with the
/// requested flavour; -1 when the shim does not wrap that ABI (the caller passes through).
int SelectVersion(const char* base, int cuda_version, bool per_thread);

/// Per-thread call counters. Each thread counts in its own block with a plain load/store (no
/// locked instruction on the launch path); readers sum the blocks of all threads that ever
/// called us. Blocks are never freed (a few hundred bytes per thread), so the sum stays exact
/// after threads exit.
struct ThreadCounters {
  std::atomic<std::uint64_t> calls[kSymbolCount];
  ThreadCounters* next;
};
extern __thread ThreadCounters* t_counters __attribute__((tls_model("initial-exec")));
ThreadCounters* RegisterThreadCounters();

inline void CountCall(SymbolId id) {
  ThreadCounters* c = t_counters;
  if (__builtin_expect(c == nullptr, 0)) c = RegisterThreadCounters();
  c->calls[id].store(c->calls[id].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

/// Sum over all threads of the calls of `id`.
std::uint64_t TotalCalls(SymbolId id);

}  // namespace chameleon::shim
