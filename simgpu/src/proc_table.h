// The cuGetProcAddress table (generated from the toolkit headers, see gen_proc_table.cmake).
#pragma once

namespace chameleon::simgpu {

enum class ProcStatus { kFound, kNotFound, kVersionTooLow };

/// The entry point `symbol` resolves to for `cuda_version` (e.g. 12040), choosing the per-thread
/// default stream variant when `per_thread` and one exists. Null unless kFound.
void* LookupProc(const char* symbol, int cuda_version, bool per_thread, ProcStatus* status);

}  // namespace chameleon::simgpu
