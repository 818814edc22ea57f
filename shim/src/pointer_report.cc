#include "pointer_report.h"

#include <vector>

#include "runtime.h"
#include "swap/pointer_scan.h"

namespace chameleon::shim {

std::uint64_t TelemetryUplink::DetailedIterationsDone() const {
  return rt_->telemetry.detail_done();
}

void TelemetryUplink::PointerTargetsFound(std::uint64_t scan,
                                          std::span<const CUdeviceptr> targets) {
  Runtime& rt = *rt_;
  if (targets.empty() || !rt.telemetry.active()) return;
  std::vector<std::uint64_t> ids;
  ids.reserve(targets.size());
  for (const CUdeviceptr target : targets) ids.push_back(rt.table.Lookup(target).id);
  for (const std::vector<std::uint8_t>& payload : swap::EncodePointerTargets(scan, ids)) {
    rt.telemetry.PushEvent(ipc::RecordType::kPointerTargets, payload.data(), payload.size());
  }
}

}  // namespace chameleon::shim
