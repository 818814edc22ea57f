#include "op_timer.h"

#include <algorithm>
#include <limits>
#include <new>

namespace chameleon::shim {

void OpTimer::Configure(const DriverAux* aux) {
  const bool usable = aux != nullptr && aux->event_create != nullptr &&
                      aux->event_record != nullptr && aux->event_elapsed_time != nullptr &&
                      aux->event_synchronize != nullptr;
  aux_ = usable ? aux : nullptr;
}

void OpTimer::Open() {
  if (aux_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  for (const Slot& s : open_.slots) {  // an iteration that never closed (a detach)
    if (s.start != nullptr) free_events_.push_back(s.start);
    if (s.stop != nullptr) free_events_.push_back(s.stop);
  }
  open_.slots.clear();
  open_.epoch = next_epoch_++;
  if (next_epoch_ == 0) next_epoch_ = 1;
  armed_.store(true, std::memory_order_relaxed);
}

void OpTimer::Close() {
  if (aux_ == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  armed_.store(false, std::memory_order_relaxed);
  for (const Slot& s : closed_.slots) {  // never collected (a capturing boundary)
    if (s.start != nullptr) free_events_.push_back(s.start);
    if (s.stop != nullptr) free_events_.push_back(s.stop);
  }
  closed_ = std::move(open_);
  open_ = Batch{};
}

OpTimer::Batch* OpTimer::BatchOf(std::uint32_t epoch) {
  if (epoch != 0 && open_.epoch == epoch) return &open_;
  if (epoch != 0 && closed_.epoch == epoch) return &closed_;
  return nullptr;
}

CUevent OpTimer::TakeEvent() {
  if (!free_events_.empty()) {
    CUevent e = free_events_.back();
    free_events_.pop_back();
    return e;
  }
  CUevent e = nullptr;
  if (aux_->event_create(&e, CU_EVENT_DEFAULT) != CUDA_SUCCESS) return nullptr;
  return e;
}

std::uint64_t OpTimer::Start(CUstream stream) {
  if (aux_ == nullptr) return 0;
  std::lock_guard<std::mutex> lock(mu_);
  if (open_.epoch == 0 || open_.slots.size() >= kMaxOps) return 0;
  Slot slot;
  slot.start = TakeEvent();
  if (slot.start == nullptr) return 0;
  if (aux_->event_record(slot.start, stream) != CUDA_SUCCESS) {
    free_events_.push_back(slot.start);
    return 0;
  }
  open_.slots.push_back(slot);
  return (std::uint64_t{open_.epoch} << 32) | open_.slots.size();  // index + 1
}

void OpTimer::Stop(std::uint64_t handle, std::uint32_t ordinal, CUstream stream) {
  if (aux_ == nullptr || handle == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  Batch* batch = BatchOf(static_cast<std::uint32_t>(handle >> 32));
  const std::size_t index = static_cast<std::uint32_t>(handle) - 1;
  if (batch == nullptr || index >= batch->slots.size()) return;  // collected meanwhile
  Slot& slot = batch->slots[index];
  if (ordinal == kNotDetailed || slot.stop != nullptr) return;
  slot.stop = TakeEvent();
  if (slot.stop == nullptr) return;
  if (aux_->event_record(slot.stop, stream) != CUDA_SUCCESS) {
    free_events_.push_back(slot.stop);
    slot.stop = nullptr;
    return;
  }
  slot.ordinal = ordinal;
}

std::vector<ipc::OpTime> OpTimer::Collect() {
  std::vector<ipc::OpTime> out;
  if (aux_ == nullptr) return out;
  std::lock_guard<std::mutex> lock(mu_);
  out.reserve(closed_.slots.size());
  for (Slot& s : closed_.slots) {
    float ms = 0;
    if (s.stop != nullptr && aux_->event_synchronize(s.stop) == CUDA_SUCCESS &&
        aux_->event_elapsed_time(&ms, s.start, s.stop) == CUDA_SUCCESS && ms >= 0) {
      const double ns = static_cast<double>(ms) * 1e6;
      constexpr double kMaxNs = std::numeric_limits<std::uint32_t>::max();
      out.push_back({s.ordinal, static_cast<std::uint32_t>(std::min(ns, kMaxNs))});
    }
    if (s.start != nullptr) free_events_.push_back(s.start);
    if (s.stop != nullptr) free_events_.push_back(s.stop);
  }
  closed_ = Batch{};
  std::sort(out.begin(), out.end(),
            [](const ipc::OpTime& a, const ipc::OpTime& b) { return a.op < b.op; });
  return out;
}

void OpTimer::ResetForChild() {
  new (&mu_) std::mutex();
  armed_.store(false, std::memory_order_relaxed);
  // The parent's events belong to its context: dropped, never destroyed here.
  open_ = Batch{};
  closed_ = Batch{};
  free_events_.clear();
}

}  // namespace chameleon::shim
