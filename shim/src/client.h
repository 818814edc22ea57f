// The shim's connection to chameleond, run by one background thread per process.
//
// The first attempt runs synchronously on the application thread that triggered it, bounded by
// CHAMELEON_CONNECT_TIMEOUT_MS (default 5 ms): with a daemon, records flow from the first op;
// without one, the program has lost at most that much. Afterwards the thread retries with
// exponential backoff (up to CHAMELEON_RETRY_MS), and while connected it writes the heartbeat,
// copies the producer counters and gauges into the segment header, follows control_flags
// (disable, detailed-iteration requests) and polls the policy mailbox for a new boundary
// signature. When the daemon goes away, the shim detaches and keeps running untouched.
//
// The client sits above the op path (it attaches the telemetry to the segment) and beside the
// executor, which it reaches only through the PolicySink it is given (docs/shim.md, "Layers").
//
// Thread-safety: StartClient is called once (Runtime::client_started guards it);
// ClientForgetAfterFork only in a fork child.
#pragma once

#include <cstdint>

namespace chameleon::shim {

struct Runtime;
class PolicySink;

/// Starts the client (its synchronous first attempt, then the thread). `sink` receives the
/// daemon's policies and outlives the process's client, like `rt`.
void StartClient(Runtime* rt, PolicySink* sink);
void ClientForgetAfterFork();

/// Snapshot for chameleon_shim_get_stats.
struct ClientStatus {
  bool connected = false;
  std::uint32_t client_id = 0;
  std::uint64_t connects = 0;
  std::uint64_t policy_generation = 0;
};
ClientStatus GetClientStatus();

/// Marks a clean exit in the segment (library destructor).
void ClientNoteExit();

}  // namespace chameleon::shim
