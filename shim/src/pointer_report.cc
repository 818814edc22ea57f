#include "pointer_report.h"

#include <vector>

#include "runtime.h"
#include "swap/pointer_scan.h"

namespace chameleon::shim {

void ReportPointerTargets(Runtime& rt, std::uint64_t scan, std::span<const CUdeviceptr> targets) {
  if (targets.empty() || !rt.telemetry.active()) return;
  std::vector<std::uint64_t> ids;
  ids.reserve(targets.size());
  for (const CUdeviceptr target : targets) ids.push_back(rt.table.Lookup(target).id);
  for (const std::vector<std::uint8_t>& payload : swap::EncodePointerTargets(scan, ids)) {
    rt.telemetry.PushEvent(ipc::RecordType::kPointerTargets, payload.data(), payload.size());
  }
}

}  // namespace chameleon::shim
