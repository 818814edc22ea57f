#include "swap/fence_sweep.h"

namespace chameleon::shim::swap {

bool FenceSweep::Shared(CUstream stream) {
  return stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD;
}

bool FenceSweep::Done(const Fence* f) {
  if (f == nullptr) return true;
  if (Shared(f->stream)) {
    ++queries_;
    return fences_->Done(f);
  }
  Known& known = streams_[f->stream];
  if (f->seq <= known.done_up_to) return true;
  if (f->seq >= known.pending_from) return false;
  ++queries_;
  if (fences_->Done(f)) {
    known.done_up_to = f->seq;  // above the old mark: checked first
    return true;
  }
  known.pending_from = f->seq;  // below the old one, likewise
  return false;
}

void FenceSweep::Prime(const std::vector<const Fence*>& fences) {
  std::unordered_map<CUstream, const Fence*> newest;
  for (const Fence* f : fences) {
    if (f == nullptr || Shared(f->stream)) continue;
    const Fence*& n = newest[f->stream];
    if (n == nullptr || f->seq > n->seq) n = f;
  }
  for (const auto& [stream, f] : newest) Done(f);
}

}  // namespace chameleon::shim::swap
