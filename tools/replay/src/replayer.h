// Replays a trace's workload on the CUDA driver: persistent storages allocated and filled once,
// then N iterations (iteration i replays recorded step i mod steps), each timed with events on
// the replay stream, then `peak` and the checksum read back from device memory.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "allocator.h"
#include "driver.h"
#include "kernels.h"
#include "options.h"
#include "schedule.h"

namespace chameleon::replay {

/// One replay run. Not thread-safe.
class Replayer {
 public:
  Replayer(const ReplayOptions& options, const trace::Trace& trace,
           const trace::Workload& workload);
  ~Replayer();

  /// Runs every iteration and prints `iteration N time S`, `shift at iteration N`, `peak B` and
  /// `checksum H` to stdout. Throws OutOfMemory / DriverError; where() says where it stopped.
  void Run();

  /// Measured device time of iteration 0, in seconds.
  double first_iteration_s() const { return first_iteration_s_; }
  /// "iteration I, op K (name)" of the last launch issued, for error messages.
  const std::string& where() const { return where_; }

 private:
  void Setup();
  void Calibrate();
  double ElapsedNs(CUevent a, CUevent b);
  void AllocatePersistent();
  double RunIteration(int iteration, const IterationPlan& plan);
  void Allocate(std::uint32_t storage, bool init);
  void LaunchOp(std::uint32_t op);
  void Launch(CUfunction f, void** params);
  void CorruptOneInputByte(int iteration, const IterationPlan& plan);
  std::uint64_t ReadChecksum();
  std::uint32_t Words(std::uint32_t storage) const;

  const ReplayOptions& options_;
  const trace::Trace& trace_;
  const trace::Workload& w_;
  DriverApi api_;
  CUdevice device_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  CUevent start_ = nullptr, end_ = nullptr;
  CUmodule module_ = nullptr;
  std::unique_ptr<ReplayModule> image_;  // outlives module_
  CUfunction probe_fn_ = nullptr, init_fn_ = nullptr, digest_fn_ = nullptr;
  std::vector<CUfunction> op_fns_;  // per token
  CUdeviceptr digest_ = 0;
  std::unique_ptr<Allocator> alloc_;
  std::vector<CUdeviceptr> ptr_;  // per storage; 0 while not allocated
  double first_iteration_s_ = 0;
  double latency_ns_ = 0;    // measured kernel launch latency
  double bytes_per_ns_ = 0;  // measured cost-model bandwidth
  std::string where_ = "setup";
};

}  // namespace chameleon::replay
