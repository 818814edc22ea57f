// Initialisation of the shim, the top of its layers (docs/shim.md, "Layers"): the only unit that
// knows every other one, and wires them together.
//
// Two stages, both lazy because the shim is a guest that cannot run code of its own before the
// program calls the driver:
//  1. Enter, on every wrapper's first call: reads the environment, opens the real driver and
//     registers the fork handlers (InitSlow, under a mutex). One acquire load once done.
//  2. EnterTracked, on the wrappers whose call implies an initialised driver and which the
//     daemon must see (ops, allocations, synchronisations, maps): stage 1, then the daemon client
//     (StartDaemonClient) the first time. Not on cuGetProcAddress: cudart looks entry points up
//     before cuInit, and the client's device facts need an initialised driver. One relaxed load
//     once done.
// DecideExecutor then turns the swap executor on or leaves it off, once, at the first allocation:
// after stage 2, so that a daemon that is up has been attached by the client's synchronous first
// attempt.
//
// Thread-safe: any thread may enter; each stage runs once per process (and again in a fork
// child, which forgets the parent's daemon connection and executor).
#pragma once

#include <atomic>

#include "executor.h"
#include "runtime.h"
#include "symbols.h"

namespace chameleon::shim {

/// Stage 1 (Enter's slow path).
void InitSlow();
/// Stage 2: starts the daemon client unless it runs already or is not wanted (pass-through,
/// CHAMELEON_TELEMETRY=0). Its first connection attempt is synchronous (client.h).
void StartDaemonClient(Runtime& rt);

/// Entry of every wrapper: counts the call and makes sure the shim is initialised (stage 1).
inline Runtime& Enter(SymbolId id) {
  CountCall(id);
  if (__builtin_expect(g_mode.load(std::memory_order_acquire) == 0, 0)) InitSlow();
  return GetRuntime();
}

/// Entry of a wrapper whose call the daemon must see (stages 1 and 2).
inline Runtime& EnterTracked(SymbolId id) {
  Runtime& rt = Enter(id);
  if (__builtin_expect(!rt.client_started.load(std::memory_order_relaxed), 0)) {
    StartDaemonClient(rt);
  }
  return rt;
}

/// The executor when on, deciding first if nobody has (allocation calls, cuMemGetInfo): on when
/// CHAMELEON_DEVICE_LIMIT is set, or a daemon is attached or its socket exists. The decision
/// never changes for the process.
Executor* DecideExecutor(Runtime& rt);

}  // namespace chameleon::shim
