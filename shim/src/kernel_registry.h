// Tokens and parameter layouts per kernel handle (CUfunction or CUkernel).
//
// The first launch of a handle takes the slow path under a mutex: name it once through
// cuFuncGetName (or cuKernelGetName), give the name a token (equal names share one, so the same
// kernel in several contexts or modules keeps one identity), read the parameter layout through
// cuFuncGetParamInfo (or cuKernelGetParamInfo), and publish the entry in an open-addressed table
// whose key is stored last with release. Later launches find it with a few acquire loads: no lock,
// allocation or syscall. Entries are never removed (modules are rarely unloaded, and a stale
// handle only costs a slot), so readers never see freed memory.
//
// Thread-safety: Find is lock-free; Register and the name-table functions take the mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "chameleon/ipc/name_table.h"
#include "real_driver.h"

namespace chameleon::shim {

/// A parameter that can hold a pointer (size >= 8).
struct PointerParam {
  std::uint16_t index;   ///< position in kernelParams
  std::uint16_t offset;  ///< byte offset in a packed parameter buffer
  std::uint16_t size;    ///< bytes
  std::uint16_t reserved;
};

/// Parameter layout of one kernel. Immutable after publication; inline arrays so a launch reads
/// one or two cache lines.
struct KernelInfo {
  static constexpr std::uint32_t kMaxPointerParams = 30;
  std::uint32_t token = 0;
  std::uint16_t param_count = 0;    ///< 0 when the driver could not tell
  std::uint16_t pointer_count = 0;  ///< entries in `pointers` (the first kMaxPointerParams)
  bool layout_known = false;
  PointerParam pointers[kMaxPointerParams] = {};
};

class KernelRegistry {
 public:
  static constexpr std::uint32_t kCapacity = 1u << 14;

  KernelRegistry();
  /// Hot path: the published info for `handle`, or null (then call Register).
  const KernelInfo* Find(const void* handle) const {
    const std::uint64_t key = reinterpret_cast<std::uint64_t>(handle);
    std::uint32_t slot = Hash(key);
    for (std::uint32_t probe = 0; probe < kMaxProbe; ++probe) {
      const Slot& s = slots_[(slot + probe) & (kCapacity - 1)];
      const std::uint64_t k = s.key.load(std::memory_order_acquire);
      if (k == key) return s.info;
      if (k == 0) return nullptr;
    }
    return nullptr;
  }
  /// Slow path: names and publishes `handle`. Returns null only when the table is full (the
  /// launch is then recorded with the unknown token). `aux` gives the driver functions.
  const KernelInfo* Register(const void* handle, const DriverAux& aux);

  /// Points the registry at a new name table and republishes every name already known (a new
  /// daemon connection). Pass a default-constructed writer to stop publishing.
  void AttachNames(ipc::NameTableWriter writer, bool valid, std::atomic<std::uint64_t>* dropped);

  /// The registry's mutex, for the fork handlers only.
  std::mutex& mutex() { return mu_; }

  /// Name of a token (slow path, tests and seqchange logging); empty when unknown.
  std::string NameOf(std::uint32_t token);

 private:
  static constexpr std::uint32_t kMaxProbe = 64;
  struct Slot {
    std::atomic<std::uint64_t> key{0};
    const KernelInfo* info = nullptr;
  };
  static std::uint32_t Hash(std::uint64_t key) {
    return static_cast<std::uint32_t>(((key >> 4) * 0x9E3779B97F4A7C15ull) >> 50) & (kCapacity - 1);
  }
  std::uint32_t TokenForName(const std::string& name);
  static void ReadLayout(const void* handle, const DriverAux& aux, KernelInfo* info);

  Slot* slots_;  // kCapacity, never freed
  std::mutex mu_;
  std::unordered_map<std::string, std::uint32_t> tokens_;  // guarded by mu_
  std::vector<std::string> names_;                         // token - kFirstKernelToken -> name
  ipc::NameTableWriter writer_;                            // guarded by mu_
  bool writer_valid_ = false;
  std::atomic<std::uint64_t>* names_dropped_ = nullptr;
};

}  // namespace chameleon::shim
