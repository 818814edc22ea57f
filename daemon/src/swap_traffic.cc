#include "chameleon/daemon/swap_traffic.h"

namespace chameleon::daemon {

void SwapTraffic::OnMark(std::uint64_t boundary, std::uint64_t out_bytes, std::uint64_t in_bytes) {
  if (boundary == 0) return;  // a layout-1.0 mark without a boundary index
  samples_[boundary % kMarks] = {boundary, out_bytes, in_bytes};
}

std::optional<SwapTraffic::Moved> SwapTraffic::During(std::uint64_t interval) const {
  const Sample& begin = samples_[interval % kMarks];
  const Sample& end = samples_[(interval + 1) % kMarks];
  if (interval == 0 || begin.boundary != interval || end.boundary != interval + 1 ||
      end.out_bytes < begin.out_bytes || end.in_bytes < begin.in_bytes) {
    return std::nullopt;
  }
  return Moved{end.out_bytes - begin.out_bytes, end.in_bytes - begin.in_bytes};
}

double SwapTraffic::Seconds(const Moved& moved, double out_bytes_per_s, double in_bytes_per_s) {
  double s = 0;
  if (out_bytes_per_s > 0) s += double(moved.out_bytes) / out_bytes_per_s;
  if (in_bytes_per_s > 0) s += double(moved.in_bytes) / in_bytes_per_s;
  return s;
}

}  // namespace chameleon::daemon
