// The detailed profile of one iteration: the input of the policy generator.
// Produced by the trace replayer (chameleon-replay --emit-profile), by the daemon's detailed mode
// (chameleonctl dump-profile), and by tests. Its JSON form is documented in docs/profile-format.md
// (profile_json.h reads and writes it). The whole iteration is timed (iteration_s); the daemon's
// profiles also carry each op's measured device time, traces and older profiles do not
// (op_seconds.h: what the planner makes of either).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chameleon::policy {

enum class Phase : std::uint8_t { kUnknown = 0, kForward = 1, kBackward = 2, kOptimizer = 3 };

/// One op (kernel launch, copy or memset) in issue order.
struct ProfileOp {
  std::uint32_t token = 0;  ///< integer id of the op's kernel/name (ipc tokens)
  std::string name;         ///< may be empty when unknown
  Phase phase = Phase::kUnknown;
  std::vector<std::uint32_t> reads;    ///< tensor indices read
  std::vector<std::uint32_t> writes;   ///< tensor indices written
  std::uint64_t bytes_live_after = 0;  ///< device bytes in use after this op
  double device_s = 0;                 ///< measured device time of the op; 0 = not measured
};

/// One tensor (an allocation; in caching-allocator mode a segment). Its index in
/// Profile::tensors is its id in ProfileOp::reads/writes.
struct ProfileTensor {
  std::uint64_t external_id = 0;  ///< allocation id / trace storage id, for explanations
  std::uint64_t bytes = 0;
  std::int32_t alloc_op =
      -1;                     ///< allocated just before this op; -1: live when the iteration starts
  std::int32_t free_op = -1;  ///< freed just after this op; -1: still live when it ends
  std::vector<std::uint32_t> uses;  ///< op indices that read or write it, ascending
  bool swappable = true;            ///< false for exported/IPC or pointer-table targets
  /// Kept on the device by the daemon's choice though the executor serves it like a swappable
  /// tensor (a pointer-table target): never a candidate, yet held in whole chunks (DeviceBytes).
  /// A tensor that passed through (below the executor's size) is unswappable and not pinned.
  bool pinned = false;
  /// The device it lives on (the client's ordinal). A process driving several devices (a
  /// pipeline) is planned one device at a time: ProjectToDevice (device_profile.h).
  std::uint16_t device = 0;
};

struct Profile {
  std::uint32_t format_version = 1;
  std::string source;             ///< free text: trace file, client pid, ...
  double iteration_s = 0;         ///< measured iteration time (device time)
  std::uint32_t layers_hint = 0;  ///< number of model layers if known (0 = unknown)
  std::vector<ProfileOp> ops;
  std::vector<ProfileTensor> tensors;
};

}  // namespace chameleon::policy
