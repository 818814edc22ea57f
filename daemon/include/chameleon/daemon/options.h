// Every setting of chameleond with its built-in default. The daemon runs with no configuration at
// all; the config file and command-line flags (config_file.h, service_flags.h) override these, and
// Daemon::UpdateOptions applies a new set live (docs/operations.md lists what changes when).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chameleon/ipc/constants.h"
#include "chameleon/policy/options.h"

namespace chameleon::daemon {

/// Thresholds of the lightweight profiler, the stage machine and the boundary detector.
struct DetectionOptions {
  double similarity_threshold = 0.95;     ///< stable step: bigram cosine strictly above this ...
  double length_change_threshold = 0.05;  ///< ... and relative length change strictly below this
  int stage_m = 2;  ///< WARMUP -> GEN_POLICY after more than m stable steps (paper: 2)
  int stage_n = 5;  ///< GEN_POLICY -> STABLE after more than n stable steps (paper: 5)
  /// Periods a boundary must be confirmed over before it is accepted.
  std::uint32_t min_periods = 3;
  /// Shortest period accepted as an iteration: set-up phases repeat tiny patterns (a copy and a
  /// kernel per weight) that are not the training loop.
  std::uint32_t min_period_ops = 8;
  /// Longest token n-gram tried as a boundary signature.
  std::uint32_t max_gram = 8;
  /// Relative deviation of a period from the median that still counts as "the same period";
  /// covers a few percent of inserted or removed ops per iteration.
  double gap_tolerance = 0.10;
  /// Ops kept per client while no boundary is known (4 bytes each). Bounds the longest iteration
  /// that can be detected to about max_history_ops / (min_periods + 1).
  std::uint32_t max_history_ops = 1u << 20;
  /// fnmatch(3) patterns on kernel names: a matching kernel is the iteration boundary and
  /// automatic detection is skipped (for loops whose period is not visible in the op stream).
  std::vector<std::string> boundary_patterns;
};

/// Device memory a client's policy must fit in, per CUDA device ordinal (the config file's
/// `devices` list). Leaves headroom for other tenants of the GPU.
struct DeviceLimit {
  std::uint32_t index = 0;        ///< device ordinal as the client process sees it
  std::uint64_t limit_bytes = 0;  ///< > 0
};

/// Who may take part in lending: everyone, or the listed uids.
struct UidRule {
  bool all = true;                  ///< true: every uid (the GPU opt-in is the real gate)
  std::vector<std::uint32_t> uids;  ///< when !all: these uids only
  bool Allows(std::uint32_t uid) const;
};

/// Node placement and peer-HBM leases (docs/daemon.md "Node placement and leases"). Lending is
/// off until the operator opts GPUs in: a GPU may run processes that are not the daemon's
/// clients, whose memory use no client's peak shows.
struct LendingOptions {
  /// false: every client's swaps go to its own host memory (the config's `placement: host`).
  bool node_placement = true;
  bool all_gpus = false;                     ///< every GPU a client reports may lend (`gpus: all`)
  std::vector<std::string> gpus;             ///< else these PCI bus ids (lower-case) only
  UidRule lenders;                           ///< uids whose GPUs may be lent
  UidRule borrowers;                         ///< uids that may hold peer memory
  std::uint64_t reserve_bytes = 1ull << 30;  ///< kept free on a lent GPU beyond the owner's peak
  /// From a revocation to the lessee's proof that it moved the bytes home. 5 s: the lessee picks a
  /// new policy up at its next iteration boundary (seconds for a large step) and then copies tens
  /// of GB over a ~50 GB/s host link.
  std::uint64_t revoke_deadline_ns = 5'000'000'000;
  /// `gpu` (a PCI bus id) is opted in.
  bool LendsGpu(const std::string& gpu) const;
};

/// Settings of the daemon process.
struct DaemonOptions {
  std::string socket_path = ipc::kDefaultSocketPath;
  std::uint32_t socket_mode = 0666;  ///< the service packaging narrows this to a group
  /// HOST:PORT of the Prometheus endpoint; port 0 picks a free one; empty disables it.
  std::string metrics_listen = "127.0.0.1:9464";
  std::uint32_t max_clients = 256;  ///< also bounds the metric series (one label per slot)
  std::uint32_t drain_interval_ms = 2;
  std::uint32_t drain_batch_records = 65536;  ///< per client per tick, so one client cannot starve
  std::uint32_t housekeeping_interval_ms = 100;        ///< heartbeats, metric copies, liveness
  std::uint64_t heartbeat_interval_ns = 100'000'000;   ///< told to clients in WELCOME
  std::uint64_t heartbeat_timeout_ns = 5'000'000'000;  ///< client heartbeat older than this: dead
  std::uint64_t stuck_record_timeout_ns = 1'000'000'000;  ///< claimed record older: writer died
  /// Stop on SIGINT/SIGTERM (chameleond sets it; embedded daemons in tests do not).
  bool handle_signals = false;
  DetectionOptions detection;
  /// Base of every client's GEN_POLICY candidates (size weight C, prefetch margin, link model);
  /// policy::CandidateConfigs varies C and the margin around it. device_limit_bytes is ignored
  /// here: each generation takes EffectiveDeviceLimit().
  policy::GeneratorOptions policy;
  /// A candidate planning the same swaps as one already published is not tried again
  /// (docs/detection.md §4). Off: every configuration is published and measured (the paper's
  /// behaviour, kept for comparison and for the tests of interval crediting, which need one
  /// generation per configuration). Not in the YAML or the flags.
  bool deduplicate_candidates = true;
  /// STABLE's chosen plan is planned again with a larger reserve when it evicts in a steady
  /// iteration (ReserveFeedback; docs/policy.md, "Reserve"). YAML `policy.reserve_feedback`.
  bool reserve_feedback = true;
  /// Plans STABLE chose that each client keeps, one per op sequence, so that a sequence coming
  /// back after a shift has its plan again at once (PlanMemory; docs/detection.md, "Remembered
  /// plans"), and so that a repeated variant of a sequence under which its plan evicts gets a plan
  /// of its own; plans in progress a shift cut short count too, resumed on the return. 0: none of
  /// these (every return goes through the stages, a variant raises the reserve).
  /// YAML `policy.remembered_plans`.
  std::uint32_t remembered_plans = 8;
  /// Where the order of a client's iterations so far says which sequence runs next but one
  /// (SequencePredictor: a schedule of phases), its remembered plan is published ahead of it,
  /// so the switch lands on the iteration instead of two later (docs/detection.md, "Switching
  /// ahead of a schedule"). Needs remembered_plans. YAML `policy.predict_switches`.
  bool predict_switches = true;
  std::vector<DeviceLimit> device_limits;  ///< unique indices (the config reader checks)
  LendingOptions lending;
};

/// The configured limit for device `ordinal`, or 0 when `options` has none for it.
std::uint64_t ConfiguredDeviceLimit(const DaemonOptions& options, std::int64_t ordinal);

/// Device memory a client's policy is generated for. The smaller of the two limits that are set
/// wins, so neither the operator (config `devices`) nor the job (CHAMELEON_DEVICE_LIMIT, which the
/// shim publishes in SegmentHeader::device_limit_bytes) can be overridden into using more memory
/// than it allowed; a configured limit is also capped at the device's total memory. With neither
/// set, the device's total memory from HELLO. 0 means unknown (no policy can be generated).
std::uint64_t EffectiveDeviceLimit(std::uint64_t configured, std::uint64_t client,
                                   std::uint64_t total_memory);

}  // namespace chameleon::daemon
