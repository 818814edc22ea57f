#include "fault_hook.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config.h"

namespace chameleon::simgpu {
namespace {

// Written once by LoadFaultHook (under cuInit's once flag) before any copy can be submitted.
std::uint64_t g_nth = 0;  // 0: the hook is off
std::uint64_t g_min_bytes = 0;
std::atomic<std::uint64_t> g_seen{0};  // qualifying copies submitted so far

constexpr const char* kForm =
    "SIMGPU_FAULT_DROP_COPY must be <n>:<min-size> with n >= 1 and min-size >= 2MiB";

}  // namespace

std::string LoadFaultHook() {
  const char* v = std::getenv("SIMGPU_FAULT_DROP_COPY");
  if (!v || !*v) return "";
  const std::string_view text(v);
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return kForm;
  const std::string count(text.substr(0, colon));
  char* end = nullptr;
  errno = 0;
  const unsigned long long nth = std::strtoull(count.c_str(), &end, 10);
  std::uint64_t min_bytes = 0;
  if (count.empty() || count[0] == '-' || errno != 0 || *end != '\0' || nth == 0 ||
      !ParseSize(text.substr(colon + 1), &min_bytes) || min_bytes < kDroppedBytes)
    return kForm;
  g_nth = nth;
  g_min_bytes = min_bytes;
  return "";
}

Skip FaultHookSkip(std::size_t n) {
  if (g_nth == 0 || n < g_min_bytes) return {};
  if (g_seen.fetch_add(1, std::memory_order_relaxed) + 1 != g_nth) return {};
  const std::size_t middle = n / 2;
  return Skip{middle - kDroppedBytes / 2, middle + kDroppedBytes / 2};
}

}  // namespace chameleon::simgpu
