#include "fault_hook.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string_view>
#include <vector>

#include "config.h"

namespace chameleon::simgpu {
namespace {

// Written once by LoadFaultHook (under cuInit's once flag) before any copy can be submitted.
std::uint64_t g_nth = 0;  // 0: the hook is off
std::uint64_t g_min_bytes = 0;
bool g_delay = false;
std::atomic<std::uint64_t> g_seen{0};  // qualifying copies submitted so far

// The delayed bytes: written by the chosen copy's worker, landed by a later copy's worker.
struct Held {
  std::mutex mu;
  std::uintptr_t dst = 0;
  std::vector<unsigned char> bytes;
};
Held& TheHeld() {
  static Held* held = new Held;  // never destroyed: stream workers may outlive static teardown
  return *held;
}
std::atomic<bool> g_holding{false};

constexpr const char* kDropForm =
    "SIMGPU_FAULT_DROP_COPY must be <n>:<min-size> with n >= 1 and min-size >= 2MiB";
constexpr const char* kDelayForm =
    "SIMGPU_FAULT_DELAY_COPY must be <n>:<min-size> with n >= 1 and min-size >= 2MiB";

// Parses "<n>:<min-size>"; false when malformed.
bool ParseChoice(std::string_view text, std::uint64_t* nth, std::uint64_t* min_bytes) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  const std::string count(text.substr(0, colon));
  char* end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(count.c_str(), &end, 10);
  if (count.empty() || count[0] == '-' || errno != 0 || *end != '\0' || n == 0 ||
      !ParseSize(text.substr(colon + 1), min_bytes) || *min_bytes < kDroppedBytes)
    return false;
  *nth = n;
  return true;
}

}  // namespace

std::string LoadFaultHook() {
  const char* drop = std::getenv("SIMGPU_FAULT_DROP_COPY");
  const char* delay = std::getenv("SIMGPU_FAULT_DELAY_COPY");
  const bool has_drop = drop && *drop;
  const bool has_delay = delay && *delay;
  if (has_drop && has_delay)
    return "SIMGPU_FAULT_DROP_COPY and SIMGPU_FAULT_DELAY_COPY cannot both be set";
  if (!has_drop && !has_delay) return "";
  std::uint64_t nth = 0, min_bytes = 0;
  if (!ParseChoice(has_drop ? drop : delay, &nth, &min_bytes))
    return has_drop ? kDropForm : kDelayForm;
  g_nth = nth;
  g_min_bytes = min_bytes;
  g_delay = has_delay;
  return "";
}

FaultChoice FaultHookChoose(std::size_t n) {
  if (g_nth == 0 || n < g_min_bytes) return {};
  if (g_seen.fetch_add(1, std::memory_order_relaxed) + 1 != g_nth) return {};
  const std::size_t middle = n / 2;
  return FaultChoice{Skip{middle - kDroppedBytes / 2, middle + kDroppedBytes / 2}, g_delay};
}

void HoldDelayedBytes(std::uintptr_t dst, std::uintptr_t src, std::size_t n) {
  Held& h = TheHeld();
  std::lock_guard<std::mutex> lock(h.mu);
  h.dst = dst;
  h.bytes.assign(reinterpret_cast<const unsigned char*>(src),
                 reinterpret_cast<const unsigned char*>(src) + n);
  g_holding.store(true, std::memory_order_release);
}

void LandDelayedBytes(std::uintptr_t src, std::size_t n) {
  if (!g_holding.load(std::memory_order_acquire)) return;
  Held& h = TheHeld();
  std::lock_guard<std::mutex> lock(h.mu);
  if (h.bytes.empty()) return;
  const std::uintptr_t begin = std::max(src, h.dst);
  const std::uintptr_t end = std::min(src + n, h.dst + h.bytes.size());
  if (begin >= end) return;
  // Only the part this copy reads is certainly mapped; the rest of the held bytes are dropped
  // (the range was consumed stale either way, which is what the hook is for).
  std::memcpy(reinterpret_cast<void*>(begin), h.bytes.data() + (begin - h.dst), end - begin);
  h.bytes.clear();
  h.bytes.shrink_to_fit();
  g_holding.store(false, std::memory_order_release);
}

}  // namespace chameleon::simgpu
