// Turns a SIGSEGV/SIGBUS raised by simulated device work into an error instead of a crash, as a
// GPU turns a bad access into CUDA_ERROR_ILLEGAL_ADDRESS. Only faults raised while a worker thread
// is inside RunGuarded are caught; every other fault goes to the handler that was installed before
// (the default action, or a sanitizer's).
#pragma once

namespace chameleon::simgpu {

using GuardedFn = void (*)(void* arg);

/// Installs the process-wide handlers once. Thread-safe.
void InstallFaultHandler();
/// Held across fork() (see driver.cc) so that the child never inherits an installation half done.
void LockFaultHandlerForFork();
void UnlockFaultHandlerAfterFork();
enum class GuardResult { kOk, kFault, kException };

/// Runs fn(arg) and reports whether it faulted or threw. Whatever fn held at a fault is abandoned
/// (destructors do not run), so device work must not take locks it could fault under.
GuardResult RunGuarded(GuardedFn fn, void* arg);

}  // namespace chameleon::simgpu
