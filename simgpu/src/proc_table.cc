// Deliberately does not include cuda.h: the generated declarations below use a dummy prototype
// only to take each entry point's address.
#include "proc_table.h"

#include <cstring>

namespace chameleon::simgpu {
namespace {

struct ProcRow {
  const char* name;
  int version;
  bool per_thread;
  void* fn;
};

}  // namespace
}  // namespace chameleon::simgpu

#define SIMGPU_ABI(sym) extern "C" int sym();
#include "proc_table_gen.inc"
#undef SIMGPU_ABI

namespace chameleon::simgpu {
namespace {

const ProcRow kRows[] = {
#define SIMGPU_PROC(name, version, pt, sym) \
  {#name, version, pt != 0, reinterpret_cast<void*>(&sym)},
#include "proc_table_gen.inc"
#undef SIMGPU_PROC
};

}  // namespace

void* LookupProc(const char* symbol, int cuda_version, bool per_thread, ProcStatus* status) {
  const ProcRow* best = nullptr;
  const ProcRow* best_pt = nullptr;
  bool known = false;
  for (const ProcRow& r : kRows) {
    if (std::strcmp(r.name, symbol) != 0) continue;
    known = true;
    if (r.version > cuda_version) continue;
    const ProcRow*& slot = r.per_thread ? best_pt : best;
    if (!slot || r.version > slot->version) slot = &r;
  }
  const ProcRow* pick = per_thread && best_pt ? best_pt : best;
  if (!pick) {
    *status = known ? ProcStatus::kVersionTooLow : ProcStatus::kNotFound;
    return nullptr;
  }
  *status = ProcStatus::kFound;
  return pick->fn;
}

}  // namespace chameleon::simgpu
