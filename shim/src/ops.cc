// The op paths: launch (token + tensors), copy, memset, sync; recording for the daemon and the
// swap executor's hooks around each op. These run on every launch: no locks (the ring's bounded
// spin aside, and the executor's slow paths when a tensor is swapped), allocation, syscalls or
// logging.
#include <algorithm>
#include <cstring>

#include "wrapper_util.h"

namespace chameleon::shim {
namespace {

// Values below this are small integers, never device addresses.
constexpr std::uint64_t kMinAddress = 1ull << 16;

inline void AddCandidate(const Runtime& rt, std::uint64_t value, LaunchOp* t) {
  if (value < kMinAddress) return;
  const AllocationHit hit = rt.table.Lookup(value);
  if (hit.id == 0) return;
  std::uint64_t* ids = t->ids();
  for (std::uint16_t i = 0; i < t->count; ++i) {
    if (ids[i] == hit.id) return;
  }
  if (t->count == 0) t->device = hit.device;
  if (t->count < ipc::kMaxLaunchTensors) {
    ids[t->count] = hit.id;
    t->states[t->count++] = hit.state;
  }
}

inline void ScanWords(const Runtime& rt, const unsigned char* p, std::uint32_t bytes, LaunchOp* t) {
  // Locals, not t->budget in the loop: stores into t->ids could alias it and force reloads.
  std::uint32_t words = bytes / 8;
  const auto budget = static_cast<std::uint32_t>(t->budget);
  if (words > budget) words = budget;
  t->budget = static_cast<int>(budget - words);
  for (std::uint32_t w = 0; w < words; ++w) {
    std::uint64_t v;
    std::memcpy(&v, p + 8 * w, sizeof(v));
    AddCandidate(rt, v, t);
  }
}

void ScanExtra(const Runtime& rt, const KernelInfo* info, void** extra, LaunchOp* t) {
  const unsigned char* buffer = nullptr;
  std::size_t size = 0;
  for (int i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = static_cast<const unsigned char*>(extra[i + 1]);
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
      size = *static_cast<const std::size_t*>(extra[i + 1]);
    } else if (extra[i] != CU_LAUNCH_PARAM_BUFFER_POINTER &&
               extra[i] != CU_LAUNCH_PARAM_BUFFER_SIZE) {
      return;  // an option we do not understand: leave the buffer alone
    }
  }
  if (buffer == nullptr || size == 0) return;
  if (info != nullptr && info->layout_known) {
    for (std::uint32_t k = 0; k < info->pointer_count; ++k) {
      const std::uint32_t off = info->pointers[k].offset;
      if (off >= size || (off & 7) != 0) continue;
      const std::uint32_t len =
          static_cast<std::uint32_t>(std::min<std::size_t>(info->pointers[k].size, size - off));
      ScanWords(rt, buffer + off, len, t);
    }
    return;
  }
  // Layout unknown: every 8-byte-aligned word of the packed buffer.
  ScanWords(rt, buffer, static_cast<std::uint32_t>(std::min<std::size_t>(size, 1u << 16)), t);
}

}  // namespace

bool StreamCapturing(const Runtime& rt, CUstream stream) {
  if (rt.active_captures.load(std::memory_order_relaxed) <= 0) return false;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (rt.driver.aux.stream_is_capturing == nullptr ||
      rt.driver.aux.stream_is_capturing(stream, &status) != CUDA_SUCCESS) {
    return false;
  }
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

namespace {

// Common start of every op: what End will have to do. False when nothing (no daemon, no
// executor): the op is then forwarded untouched.
bool BeginCommon(Runtime& rt, CUstream stream, PendingOp* op) {
  op->recording = RecordingOps(rt);
  op->ex = ExecutorIfOn();
  op->active = op->recording || op->ex != nullptr;
  if (!op->active) return false;
  op->stream = stream;
  op->capture = StreamCapturing(rt, stream);
  return true;
}

CUresult ExecBefore(Runtime& rt, PendingOp* op, AllocationState* const* states, std::uint32_t n) {
  // Nothing may be added to a capturing stream, and its ops do not run now.
  if (op->ex == nullptr || op->capture) return CUDA_SUCCESS;
  return ExecutorBeforeOp(rt, *op->ex, op->token, op->stream, states, n, &op->exec);
}

void ExecAfter(PendingOp* op, AllocationState* const* states, std::uint32_t n,
               const BoundaryHit& hit) {
  if (op->ex != nullptr && !op->capture) {
    ExecutorAfterOp(*op->ex, op->token, op->stream, states, n, op->exec);
  }
  // The boundary op belongs to the iteration it closes: its swap-outs ran first.
  if (op->ex != nullptr && hit.hit) {
    if (!op->capture) ExecutorPointerScan(GetRuntime(), *op->ex, op->stream, /*boundary=*/true);
    ExecutorBoundary(*op->ex);
  }
}

}  // namespace

CUresult BeginLaunch(Runtime& rt, const void* function, CUstream stream, void** params,
                     void** extra, LaunchOp* t) {
  if (!BeginCommon(rt, stream, t)) return CUDA_SUCCESS;
  const KernelInfo* info = rt.kernels.Find(function);
  if (__builtin_expect(info == nullptr, 0)) info = rt.kernels.Register(function, rt.driver.aux);
  t->token = info != nullptr ? info->token : ipc::kTokenUnknown;
  if (params != nullptr) {
    if (info != nullptr && info->layout_known) {
      const std::uint32_t pointer_count = info->pointer_count;
      for (std::uint32_t k = 0; k < pointer_count; ++k) {
        const PointerParam& p = info->pointers[k];
        const void* value = params[p.index];
        if (value != nullptr) ScanWords(rt, static_cast<const unsigned char*>(value), p.size, t);
      }
    }
  } else if (extra != nullptr) {
    ScanExtra(rt, info, extra, t);
  }
  return ExecBefore(rt, t, t->states, t->count);
}

void EndLaunch(Runtime& rt, LaunchOp* t) {
  if (!t->active) return;
  BoundaryHit hit;
  if (t->recording) {
    ipc::LaunchRecord rec{};
    rec.token = t->token;
    rec.tensor_count = t->count;
    rec.device = t->device;
    rec.stream = reinterpret_cast<std::uint64_t>(t->stream);
    std::memcpy(t->words, &rec, sizeof(rec));
    hit =
        rt.telemetry.PushOp(ipc::RecordType::kLaunch, rec.token, rec.device, t->words,
                            sizeof(rec) + sizeof(std::uint64_t) * t->count, nullptr, 0, t->capture);
    if (__builtin_expect(hit.hit, 0)) rt.telemetry.FinishBoundary(hit, t->stream, t->capture);
  }
  ExecAfter(t, t->states, t->count, hit);
}

CUresult BeginGraphLaunch(Runtime& rt, CUstream stream, PendingOp* op) {
  if (!BeginCommon(rt, stream, op)) return CUDA_SUCCESS;
  op->token = ipc::kTokenGraphLaunch;
  // A graph's kernels are not visible here: no tensors (documented limit), but the op counts.
  return ExecBefore(rt, op, nullptr, 0);
}

void EndGraphLaunch(Runtime& rt, PendingOp* op) {
  if (!op->active) return;
  BoundaryHit hit;
  if (op->recording) {
    ipc::LaunchRecord rec{};
    rec.token = ipc::kTokenGraphLaunch;
    rec.stream = reinterpret_cast<std::uint64_t>(op->stream);
    hit = rt.telemetry.PushOp(ipc::RecordType::kLaunch, rec.token, 0, &rec, sizeof(rec), nullptr, 0,
                              op->capture);
    if (hit.hit) rt.telemetry.FinishBoundary(hit, op->stream, op->capture);
  }
  ExecAfter(op, nullptr, 0, hit);
}

CUresult BeginCopy(Runtime& rt, std::uint32_t token, std::uint64_t src, std::uint64_t dst,
                   std::uint64_t bytes, CUstream stream, bool peer, CopyOp* op) {
  if (!BeginCommon(rt, stream, op)) return CUDA_SUCCESS;
  op->type = ipc::RecordType::kCopy;
  ipc::CopyRecord& rec = op->copy;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  rec.bytes = bytes;
  const AllocationHit s = src != 0 ? rt.table.Lookup(src) : AllocationHit{};
  const AllocationHit d = dst != 0 ? rt.table.Lookup(dst) : AllocationHit{};
  if (token == 0) {
    token = peer                       ? ipc::kTokenCopyPeer
            : (s.id != 0 && d.id == 0) ? ipc::kTokenCopyDtoH
            : (s.id == 0 && d.id != 0) ? ipc::kTokenCopyHtoD
                                       : ipc::kTokenCopyDtoD;
  }
  rec.token = token;
  op->token = token;
  rec.src = s.id;
  rec.dst = d.id;
  if (s.id != 0) {
    rec.device = s.device;
    op->states[op->count++] = s.state;
  }
  if (d.id != 0) {
    rec.device = d.device;
    op->states[op->count++] = d.state;
  }
  return ExecBefore(rt, op, op->states, op->count);
}

CUresult BeginMemset(Runtime& rt, std::uint64_t dst, std::uint64_t bytes, CUstream stream,
                     CopyOp* op) {
  if (!BeginCommon(rt, stream, op)) return CUDA_SUCCESS;
  op->type = ipc::RecordType::kMemset;
  op->token = ipc::kTokenMemset;
  ipc::MemsetRecord& rec = op->memset_rec;
  rec.token = ipc::kTokenMemset;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  const AllocationHit h = rt.table.Lookup(dst);
  rec.dst = h.id;
  rec.device = h.device;
  rec.bytes = bytes;
  if (h.id != 0) op->states[op->count++] = h.state;
  return ExecBefore(rt, op, op->states, op->count);
}

void EndCopy(Runtime& rt, CopyOp* op) {
  if (!op->active) return;
  BoundaryHit hit;
  if (op->recording) {
    const bool copy = op->type == ipc::RecordType::kCopy;
    const void* rec = copy ? static_cast<const void*>(&op->copy) : &op->memset_rec;
    const std::size_t size = copy ? sizeof(op->copy) : sizeof(op->memset_rec);
    const std::uint16_t device = copy ? op->copy.device : op->memset_rec.device;
    hit = rt.telemetry.PushOp(op->type, op->token, device, rec, size, nullptr, 0, op->capture);
    if (hit.hit) rt.telemetry.FinishBoundary(hit, op->stream, op->capture);
  }
  ExecAfter(op, op->states, op->count, hit);
}

void OnSync(Runtime& rt, ipc::SyncKind kind, CUstream stream) {
  // Copies the executor was waiting for have likely completed: their ranges can be unmapped.
  if (Executor* ex = ExecutorIfOn()) ExecutorAfterSync(*ex);
  if (!RecordingOps(rt)) return;
  ipc::SyncRecord rec{};
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  rec.kind = static_cast<std::uint8_t>(kind);
  rt.telemetry.PushEvent(ipc::RecordType::kSync, &rec, sizeof(rec));
}

}  // namespace chameleon::shim
