// One stage of chameleon-train-sim --pipeline: the device, context, stream, allocator, launcher
// and model slice of one pipeline stage, and the tensors it has sent to a neighbour that the
// neighbour has not yet been seen to finish copying (docs/trainer.md, "Pipeline parallelism").
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "allocator.h"
#include "driver.h"
#include "options.h"
#include "sampled_launcher.h"
#include "shaped_model.h"

namespace chameleon::train_sim {

/// Owns one device's share of a pipeline run. Every call makes the stage's context current
/// first, so callers may interleave stages freely. Not thread-safe.
class PipelineStage {
 public:
  /// Retains device `index`'s primary context and creates the stream, allocator (counting into
  /// `total`), launcher and the model slice of `slice`.
  PipelineStage(const Options& options, const DriverApi& api, int index, const StageSlice& slice,
                LiveTotal* total);
  ~PipelineStage();
  PipelineStage(const PipelineStage&) = delete;
  PipelineStage& operator=(const PipelineStage&) = delete;

  /// Makes this stage's context current (every method below does it too).
  void Use() const;
  /// Enables peer access to `peer`'s context where the driver allows it.
  void EnablePeerAccess(const PipelineStage& peer);

  Tensor Allocate(std::size_t bytes);
  void Free(Tensor& tensor);
  /// Records an event on the stream and returns it with the host's issue number of the record.
  struct Mark {
    CUevent event = nullptr;
    std::uint64_t issued = 0;
  };
  Mark Record(std::uint64_t issued);
  /// The stream waits for `mark` (recorded by stage `from`); then every tensor this stage sent
  /// to `from` whose copy `from` issued before the mark is done in stream order, and is freed.
  void Wait(const Mark& mark, int from);
  /// Pulls `source` (on `sender`) into a new tensor of this device with cuMemcpyPeerAsync on
  /// this stage's stream, after the stream waited for the sender's mark; the sender frees
  /// `source` once it has seen this copy finish (PipelineStage::Wait). Returns the copy.
  Tensor Receive(PipelineStage& sender, const Tensor& source, std::uint64_t issued);
  /// Destroys the events recorded so far (call once the work that used them is done).
  void DropEvents();
  /// Frees everything sent and not yet freed (call after Wait on each neighbour's last mark).
  void FreeAllSent();

  ShapedModel& model() { return *model_; }
  CUstream stream() const { return stream_; }
  int index() const { return index_; }
  std::size_t live_bytes() const { return alloc_->live_bytes(); }
  std::size_t peak_bytes() const { return alloc_->peak_bytes(); }
  /// Synchronises, frees the parameters and returns every segment to the driver.
  void Teardown();

 private:
  struct Sent {
    Tensor tensor;
    int to = 0;
    std::uint64_t copy_issued = 0;
  };

  const DriverApi& api_;
  int index_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  std::unique_ptr<Allocator> alloc_;
  std::unique_ptr<SampledLauncher> launcher_;
  std::unique_ptr<ShapedModel> model_;
  std::vector<Sent> sent_;
  std::vector<CUevent> events_;  // created by Record, destroyed with the stage
};

}  // namespace chameleon::train_sim
