// The op paths' out-of-line parts: copy, memset, graph launch and sync, the packed-buffer scan
// and the executor's hooks. The launch path itself is inline in op_path.h. These run on every op:
// no locks (the ring's bounded spin aside, and the executor's slow paths when a tensor is
// swapped), allocation, syscalls or logging.
#include "op_path.h"

namespace chameleon::shim {
namespace op_path {

Collector ScanExtra(const Runtime& rt, const KernelInfo* info, void** extra, Collector c) {
  const unsigned char* buffer = nullptr;
  std::size_t size = 0;
  for (int i = 0; i < 16 && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = static_cast<const unsigned char*>(extra[i + 1]);
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE && extra[i + 1] != nullptr) {
      size = *static_cast<const std::size_t*>(extra[i + 1]);
    } else if (extra[i] != CU_LAUNCH_PARAM_BUFFER_POINTER &&
               extra[i] != CU_LAUNCH_PARAM_BUFFER_SIZE) {
      return c;  // an option we do not understand: leave the buffer alone
    }
  }
  if (buffer == nullptr || size == 0) return c;
  if (info != nullptr && info->layout_known) {
    for (std::uint32_t k = 0; k < info->pointer_count; ++k) {
      const std::uint32_t off = info->pointers[k].offset;
      if (off >= size || (off & 7) != 0) continue;
      const std::uint32_t len =
          static_cast<std::uint32_t>(std::min<std::size_t>(info->pointers[k].size, size - off));
      ScanWords(rt, buffer + off, len, c);
    }
  } else {
    // Layout unknown: every 8-byte-aligned word of the packed buffer.
    ScanWords(rt, buffer, static_cast<std::uint32_t>(std::min<std::size_t>(size, 1u << 16)), c);
  }
  return c;
}

std::uint64_t ExecAfterSlow(PendingOp* op, AllocationState* const* states, std::uint32_t n,
                            bool boundary) {
  if (!op->capture) ExecutorAfterOp(*op->ex, op->token, op->stream, states, n, op->exec);
  // The boundary op belongs to the iteration it closes: its swap-outs ran first.
  if (!boundary) return 0;
  if (!op->capture) ExecutorPointerScan(*op->ex, op->stream, /*boundary=*/true);
  return ExecutorBoundary(*op->ex);
}

void FinishBoundary(Runtime& rt, BoundaryHit hit, std::uint64_t installed, const Executor* ex,
                    CUstream stream, bool capture) {
  // The executor's generation, read after it installed the pending policy: the header's
  // figure is published by the client thread's tick and still names the previous candidate,
  // which cost the daemon one trial iteration per candidate (issue 18).
  if (installed != 0) {
    hit.generation = installed;
    // Exact: the executor switches policies only here, so the whole interval this boundary
    // starts runs under it. The daemon credits that interval without waiting for the next mark
    // to confirm the generation, and may publish the next candidate at once (docs/protocol.md).
    hit.flags = static_cast<std::uint16_t>(hit.flags | ipc::kFlagGenerationInstalled);
  }
  // What the compute streams waited for the executor so far: the daemon takes an interval's
  // share out of its device time to time the profile (docs/detection.md, "The profile's time").
  if (ex != nullptr) hit.executor_wait_measured = ExecutorWaitNs(*ex, &hit.executor_wait_ns);
  rt.telemetry.FinishBoundary(hit, stream, capture);
}

}  // namespace op_path

bool StreamCapturingSlow(const Runtime& rt, CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (rt.driver.aux.stream_is_capturing == nullptr ||
      rt.driver.aux.stream_is_capturing(stream, &status) != CUDA_SUCCESS) {
    return false;
  }
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

using namespace op_path;

CUresult BeginGraphLaunch(Runtime& rt, CUstream stream, PendingOp* op) {
  if (!BeginCommon(rt, stream, op)) return CUDA_SUCCESS;
  op->token = ipc::kTokenGraphLaunch;
  // A graph's kernels are not visible here: no tensors (documented limit), but the op counts.
  return StartTimer(rt, op, ExecBefore(op, nullptr, 0));
}

void EndGraphLaunch(Runtime& rt, PendingOp* op) {
  if (!op->active) return;
  bool boundary = false;
  BoundaryHit hit;
  if (op->recording) {
    ipc::LaunchRecord rec{};
    rec.token = ipc::kTokenGraphLaunch;
    rec.stream = reinterpret_cast<std::uint64_t>(op->stream);
    std::uint32_t detailed_op = OpTimer::kNotDetailed;
    boundary = rt.telemetry.PushOp(ipc::RecordType::kLaunch, rec.token, 0, &rec, sizeof(rec),
                                   nullptr, 0, op->capture, &hit, &op->exec.ticket, &detailed_op);
    StopTimer(rt, op, detailed_op);
  }
  const std::uint64_t installed = ExecAfter(op, nullptr, 0, boundary);
  if (boundary) FinishBoundary(rt, hit, installed, op->ex, op->stream, op->capture);
}

CUresult BeginCopy(Runtime& rt, std::uint32_t token, std::uint64_t src, std::uint64_t dst,
                   std::uint64_t bytes, CUstream stream, bool peer, CopyOp* op) {
  if (!BeginCommon(rt, stream, op)) return CUDA_SUCCESS;
  op->type = ipc::RecordType::kCopy;
  ipc::CopyRecord& rec = op->copy;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  rec.bytes = bytes;
  LookupCache& cache = ThreadLookupCache();
  const std::uint64_t version = rt.table.version();
  const AllocationHit s = src != 0 ? cache.Lookup(rt.table, version, src) : AllocationHit{};
  const AllocationHit d = dst != 0 ? cache.Lookup(rt.table, version, dst) : AllocationHit{};
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
  OpExtent extents[2];  // the copy's exact bytes on each side (program VMM pages)
  if (s.id != 0) {
    rec.device = s.device;
    extents[op->count] = {src, bytes};
    op->states[op->count++] = s.state;
  }
  if (d.id != 0) {
    rec.device = d.device;
    extents[op->count] = {dst, bytes};
    op->states[op->count++] = d.state;
  }
  return StartTimer(rt, op, ExecBefore(op, op->states, op->count, extents));
}

CUresult BeginMemset(Runtime& rt, std::uint64_t dst, std::uint64_t bytes, CUstream stream,
                     CopyOp* op) {
  if (!BeginCommon(rt, stream, op)) return CUDA_SUCCESS;
  op->type = ipc::RecordType::kMemset;
  op->token = ipc::kTokenMemset;
  ipc::MemsetRecord& rec = op->memset_rec;
  rec.token = ipc::kTokenMemset;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  const AllocationHit h = ThreadLookupCache().Lookup(rt.table, rt.table.version(), dst);
  rec.dst = h.id;
  rec.device = h.device;
  rec.bytes = bytes;
  if (h.id != 0) op->states[op->count++] = h.state;
  const OpExtent extent{dst, bytes};
  return StartTimer(rt, op, ExecBefore(op, op->states, op->count, &extent));
}

void EndCopy(Runtime& rt, CopyOp* op) {
  if (!op->active) return;
  bool boundary = false;
  BoundaryHit hit;
  if (op->recording) {
    const bool copy = op->type == ipc::RecordType::kCopy;
    const void* rec = copy ? static_cast<const void*>(&op->copy) : &op->memset_rec;
    const std::size_t size = copy ? sizeof(op->copy) : sizeof(op->memset_rec);
    const std::uint16_t device = copy ? op->copy.device : op->memset_rec.device;
    std::uint32_t detailed_op = OpTimer::kNotDetailed;
    boundary = rt.telemetry.PushOp(op->type, op->token, device, rec, size, nullptr, 0, op->capture,
                                   &hit, &op->exec.ticket, &detailed_op);
    StopTimer(rt, op, detailed_op);
  }
  const std::uint64_t installed = ExecAfter(op, op->states, op->count, boundary);
  if (boundary) FinishBoundary(rt, hit, installed, op->ex, op->stream, op->capture);
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
