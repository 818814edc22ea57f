// The op-recording paths: launch (token + tensors), copy, memset, sync. These run on every
// launch: no locks (the ring's bounded spin aside), allocation, syscalls or logging.
#include <algorithm>
#include <cstring>

#include "wrapper_util.h"

namespace chameleon::shim {
namespace {

// Bounded scan: at most this many 8-byte words per launch are looked up.
constexpr int kMaxWordsScanned = 256;
// Values below this are small integers, never device addresses.
constexpr std::uint64_t kMinAddress = 1ull << 16;

// The whole launch payload on the stack: the LaunchRecord (two words) followed by the tensor ids,
// so the ring gets one contiguous copy.
struct TensorList {
  static constexpr std::size_t kHeadWords = sizeof(ipc::LaunchRecord) / sizeof(std::uint64_t);
  std::uint64_t words[kHeadWords + ipc::kMaxLaunchTensors];
  std::uint64_t* ids = words + kHeadWords;
  std::uint16_t count = 0;
  std::uint16_t device = 0;
  int budget = kMaxWordsScanned;
};

inline void AddCandidate(const Runtime& rt, std::uint64_t value, TensorList* t) {
  if (value < kMinAddress) return;
  const AllocationHit hit = rt.table.Lookup(value);
  if (hit.id == 0) return;
  for (std::uint16_t i = 0; i < t->count; ++i) {
    if (t->ids[i] == hit.id) return;
  }
  if (t->count == 0) t->device = hit.device;
  if (t->count < ipc::kMaxLaunchTensors) t->ids[t->count++] = hit.id;
}

inline void ScanWords(const Runtime& rt, const unsigned char* p, std::uint32_t bytes,
                      TensorList* t) {
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

void ScanExtra(const Runtime& rt, const KernelInfo* info, void** extra, TensorList* t) {
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

void OnLaunch(Runtime& rt, const void* function, CUstream stream, void** params, void** extra) {
  if (!RecordingOps(rt)) return;
  const KernelInfo* info = rt.kernels.Find(function);
  if (__builtin_expect(info == nullptr, 0)) info = rt.kernels.Register(function, rt.driver.aux);
  TensorList t;
  if (params != nullptr) {
    if (info != nullptr && info->layout_known) {
      const std::uint32_t pointer_count = info->pointer_count;
      for (std::uint32_t k = 0; k < pointer_count; ++k) {
        const PointerParam& p = info->pointers[k];
        const void* value = params[p.index];
        if (value != nullptr) ScanWords(rt, static_cast<const unsigned char*>(value), p.size, &t);
      }
    }
  } else if (extra != nullptr) {
    ScanExtra(rt, info, extra, &t);
  }
  ipc::LaunchRecord rec{};
  rec.token = info != nullptr ? info->token : ipc::kTokenUnknown;
  rec.tensor_count = t.count;
  rec.device = t.device;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  std::memcpy(t.words, &rec, sizeof(rec));
  const bool capture = StreamCapturing(rt, stream);
  const BoundaryHit hit =
      rt.telemetry.PushOp(ipc::RecordType::kLaunch, rec.token, rec.device, t.words,
                          sizeof(rec) + sizeof(std::uint64_t) * t.count, nullptr, 0, capture);
  if (__builtin_expect(hit.hit, 0)) rt.telemetry.FinishBoundary(hit, stream, capture);
}

void OnGraphLaunch(Runtime& rt, CUstream stream) {
  if (!RecordingOps(rt)) return;
  ipc::LaunchRecord rec{};
  rec.token = ipc::kTokenGraphLaunch;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  const bool capture = StreamCapturing(rt, stream);
  const BoundaryHit hit = rt.telemetry.PushOp(ipc::RecordType::kLaunch, rec.token, 0, &rec,
                                              sizeof(rec), nullptr, 0, capture);
  if (hit.hit) rt.telemetry.FinishBoundary(hit, stream, capture);
}

void OnCopy(Runtime& rt, std::uint32_t token, std::uint64_t src, std::uint64_t dst,
            std::uint64_t bytes, CUstream stream) {
  if (!RecordingOps(rt)) return;
  ipc::CopyRecord rec{};
  rec.token = token;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  if (src != 0) {
    const AllocationHit h = rt.table.Lookup(src);
    rec.src = h.id;
    if (h.id != 0) rec.device = h.device;
  }
  if (dst != 0) {
    const AllocationHit h = rt.table.Lookup(dst);
    rec.dst = h.id;
    if (h.id != 0) rec.device = h.device;
  }
  rec.bytes = bytes;
  const bool capture = StreamCapturing(rt, stream);
  const BoundaryHit hit = rt.telemetry.PushOp(ipc::RecordType::kCopy, token, rec.device, &rec,
                                              sizeof(rec), nullptr, 0, capture);
  if (hit.hit) rt.telemetry.FinishBoundary(hit, stream, capture);
}

void OnCopyAuto(Runtime& rt, std::uint64_t src, std::uint64_t dst, std::uint64_t bytes,
                CUstream stream, bool peer) {
  if (!RecordingOps(rt)) return;
  std::uint32_t token = ipc::kTokenCopyPeer;
  if (!peer) {
    const bool s = rt.table.Lookup(src).id != 0;
    const bool d = rt.table.Lookup(dst).id != 0;
    token = (s && !d) ? ipc::kTokenCopyDtoH : (!s && d) ? ipc::kTokenCopyHtoD : ipc::kTokenCopyDtoD;
  }
  OnCopy(rt, token, src, dst, bytes, stream);
}

void OnMemset(Runtime& rt, std::uint64_t dst, std::uint64_t bytes, CUstream stream) {
  if (!RecordingOps(rt)) return;
  ipc::MemsetRecord rec{};
  rec.token = ipc::kTokenMemset;
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  const AllocationHit h = rt.table.Lookup(dst);
  rec.dst = h.id;
  rec.device = h.device;
  rec.bytes = bytes;
  const bool capture = StreamCapturing(rt, stream);
  const BoundaryHit hit = rt.telemetry.PushOp(ipc::RecordType::kMemset, rec.token, rec.device, &rec,
                                              sizeof(rec), nullptr, 0, capture);
  if (hit.hit) rt.telemetry.FinishBoundary(hit, stream, capture);
}

void OnSync(Runtime& rt, ipc::SyncKind kind, CUstream stream) {
  if (!RecordingOps(rt)) return;
  ipc::SyncRecord rec{};
  rec.stream = reinterpret_cast<std::uint64_t>(stream);
  rec.kind = static_cast<std::uint8_t>(kind);
  rt.telemetry.PushEvent(ipc::RecordType::kSync, &rec, sizeof(rec));
}

}  // namespace chameleon::shim
