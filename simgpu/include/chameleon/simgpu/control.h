// simgpu-only entry points exported by the simulated libcuda.so.1 (prefix simgpu). Tests and
// workloads look them up with dlsym so that the same binaries also run on a real driver, where
// the symbols are simply absent.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
/// Physical device bytes simgpu has committed now / at peak for `device` (all allocation kinds).
int simgpuGetPhysicalUsage(int device, std::uint64_t* live, std::uint64_t* peak);
/// Number of times the driver entry point `name` (exact exported name, e.g. "cuMemAlloc_v2")
/// was called in this process.
std::uint64_t simgpuGetCallCount(const char* name);
/// Current virtual time of the host clock, in nanoseconds.
std::uint64_t simgpuHostVirtualNs(void);
/// Current virtual time reached by all work submitted to `device` so far (its stream clocks' max).
std::uint64_t simgpuDeviceVirtualNs(int device);
/// Virtual time (ns) at which the work before the last record of `event` (a CUevent) ends: its
/// time as cuEventElapsedTime sees it, known at once (times are computed at submission), whether
/// or not the worker has run it. CUDA_ERROR_INVALID_HANDLE for a bad or never-recorded event.
int simgpuEventVirtualNs(void* event, std::uint64_t* ns);
/// Virtual time (ns) at which an operation submitted to `stream` (a CUstream; null = the legacy
/// stream) now would start: max(the stream's clock, the host clock). An error for a bad stream.
int simgpuStreamVirtualNs(void* stream, std::uint64_t* ns);
/// Forgets the contents of [ptr, ptr + bytes) in the order of `stream` (a CUstream; null = the
/// legacy stream): afterwards the range reads as zeros and its written pages no longer cost host
/// RAM. No virtual time. The range must be simgpu memory (device, pinned host or a mapped VMM
/// range; CUDA_ERROR_INVALID_VALUE otherwise); refused on a capturing stream
/// (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). For callers whose data in the range is dead.
int simgpuMemDiscardAsync(std::uint64_t ptr, std::size_t bytes, void* stream);
}

namespace chameleon::simgpu {
using GetPhysicalUsageFn = int (*)(int, std::uint64_t*, std::uint64_t*);
using GetCallCountFn = std::uint64_t (*)(const char*);
using HostVirtualNsFn = std::uint64_t (*)(void);
using DeviceVirtualNsFn = std::uint64_t (*)(int);
using EventVirtualNsFn = int (*)(void*, std::uint64_t*);
using StreamVirtualNsFn = int (*)(void*, std::uint64_t*);
using MemDiscardAsyncFn = int (*)(std::uint64_t, std::size_t, void*);
}  // namespace chameleon::simgpu
