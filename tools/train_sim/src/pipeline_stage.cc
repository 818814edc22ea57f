#include "pipeline_stage.h"

#include <string>

namespace chameleon::train_sim {

PipelineStage::PipelineStage(const Options& options, const DriverApi& api, int index,
                             const StageSlice& slice, LiveTotal* total)
    : api_(api), index_(index) {
  const std::string where = " (device " + std::to_string(index) + ")";
  Check(api_, api_.cuDeviceGet(&device_, index), "cuDeviceGet" + where);
  Check(api_, api_.cuDevicePrimaryCtxRetain(&context_, device_),
        "cuDevicePrimaryCtxRetain" + where);
  Use();
  Check(api_, api_.cuStreamCreate(&stream_, CU_STREAM_DEFAULT), "cuStreamCreate" + where);
  alloc_ = MakeAllocator(options.alloc, api_, device_, stream_);
  alloc_->set_total(total);
  launcher_ = std::make_unique<SampledLauncher>(api_, stream_);
  model_ =
      std::make_unique<ShapedModel>(options.shape, options.recompute, *alloc_, *launcher_, slice);
}

PipelineStage::~PipelineStage() {
  if (context_ == nullptr) return;
  // Only reached without Teardown on an error path: let queued work finish under the members.
  Use();
  api_.cuCtxSynchronize();
  for (CUevent e : events_) api_.cuEventDestroy(e);
  model_.reset();
  launcher_.reset();
  alloc_.reset();
  if (stream_ != nullptr) api_.cuStreamDestroy(stream_);
  api_.cuDevicePrimaryCtxRelease(device_);
}

void PipelineStage::Use() const { Check(api_, api_.cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

void PipelineStage::EnablePeerAccess(const PipelineStage& peer) {
  int can = 0;
  Check(api_, api_.cuDeviceCanAccessPeer(&can, device_, peer.device_), "cuDeviceCanAccessPeer");
  if (can == 0) return;  // cuMemcpyPeerAsync then stages through the host
  Use();
  const CUresult r = api_.cuCtxEnablePeerAccess(peer.context_, 0);
  if (r != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) Check(api_, r, "cuCtxEnablePeerAccess");
}

Tensor PipelineStage::Allocate(std::size_t bytes) {
  Use();
  return alloc_->Allocate(bytes);
}

void PipelineStage::Free(Tensor& tensor) {
  Use();
  alloc_->Free(tensor);
}

PipelineStage::Mark PipelineStage::Record(std::uint64_t issued) {
  Use();
  CUevent e = nullptr;
  Check(api_, api_.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  events_.push_back(e);
  Check(api_, api_.cuEventRecord(e, stream_), "cuEventRecord");
  return {e, issued};
}

void PipelineStage::Wait(const Mark& mark, int from) {
  Use();
  Check(api_, api_.cuStreamWaitEvent(stream_, mark.event, 0), "cuStreamWaitEvent");
  // `from` issued the copy and then the mark on its one stream, so the copy is done before the
  // mark, and this stream is now behind the mark: the source may be reused in stream order.
  for (auto it = sent_.begin(); it != sent_.end();) {
    if (it->to == from && it->copy_issued < mark.issued) {
      alloc_->Free(it->tensor);
      it = sent_.erase(it);
    } else {
      ++it;
    }
  }
}

Tensor PipelineStage::Receive(PipelineStage& sender, const Tensor& source, std::uint64_t issued) {
  Tensor copy = Allocate(source.bytes);
  Check(api_,
        api_.cuMemcpyPeerAsync(copy.ptr, context_, source.ptr, sender.context_, source.bytes,
                               stream_),
        "cuMemcpyPeerAsync");
  sender.sent_.push_back({source, index_, issued});
  return copy;
}

void PipelineStage::DropEvents() {
  for (CUevent e : events_) api_.cuEventDestroy(e);
  events_.clear();
}

void PipelineStage::FreeAllSent() {
  Use();
  for (Sent& s : sent_) alloc_->Free(s.tensor);
  sent_.clear();
}

void PipelineStage::Teardown() {
  Use();
  model_->Release();
  Check(api_, api_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
  alloc_->ReleaseAll();
  launcher_.reset();
  for (CUevent e : events_) api_.cuEventDestroy(e);
  events_.clear();
  api_.cuStreamDestroy(stream_);
  stream_ = nullptr;
  model_.reset();
  alloc_.reset();
  api_.cuDevicePrimaryCtxRelease(device_);
  context_ = nullptr;
}

}  // namespace chameleon::train_sim
