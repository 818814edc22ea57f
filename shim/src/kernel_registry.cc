#include "kernel_registry.h"

#include <cstdio>

#include "chameleon/ipc/event_records.h"

namespace chameleon::shim {
namespace {

// cuFuncGetParamInfo on a handle that is really a CUkernel (CUDA 12 lets cuLaunchKernel take
// either) may fail; a kernel with more parameters than this is scanned only this far.
constexpr std::uint32_t kMaxParamsQueried = 256;

}  // namespace

KernelRegistry::KernelRegistry() : slots_(new Slot[kCapacity]) {}

void KernelRegistry::ReadLayout(const void* handle, const DriverAux& aux, KernelInfo* info) {
  auto query = [&](std::uint32_t i, size_t* offset, size_t* size) {
    if (aux.func_get_param_info != nullptr &&
        aux.func_get_param_info(static_cast<CUfunction>(const_cast<void*>(handle)), i, offset,
                                size) == CUDA_SUCCESS) {
      return true;
    }
    return aux.kernel_get_param_info != nullptr &&
           aux.kernel_get_param_info(static_cast<CUkernel>(const_cast<void*>(handle)), i, offset,
                                     size) == CUDA_SUCCESS;
  };
  std::uint32_t i = 0;
  for (; i < kMaxParamsQueried; ++i) {
    size_t offset = 0;
    size_t size = 0;
    if (!query(i, &offset, &size)) break;
    if (size >= 8 && offset < (1u << 16) && size < (1u << 16) &&
        info->pointer_count < KernelInfo::kMaxPointerParams) {
      info->pointers[info->pointer_count++] =
          PointerParam{static_cast<std::uint16_t>(i), static_cast<std::uint16_t>(offset),
                       static_cast<std::uint16_t>(size), 0};
    }
  }
  info->param_count = static_cast<std::uint16_t>(i);
  info->layout_known = i > 0;
}

std::uint32_t KernelRegistry::TokenForName(const std::string& name) {
  auto it = tokens_.find(name);
  if (it != tokens_.end()) return it->second;
  const std::uint32_t token = ipc::kFirstKernelToken + static_cast<std::uint32_t>(names_.size());
  tokens_.emplace(name, token);
  names_.push_back(name);
  if (writer_valid_ && !writer_.Append(token, name) && names_dropped_ != nullptr) {
    names_dropped_->fetch_add(1, std::memory_order_relaxed);
  }
  return token;
}

const KernelInfo* KernelRegistry::Register(const void* handle, const DriverAux& aux) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const KernelInfo* found = Find(handle)) return found;  // another thread won the race
  const std::uint64_t key = reinterpret_cast<std::uint64_t>(handle);
  std::uint32_t slot = Hash(key);
  Slot* free_slot = nullptr;
  for (std::uint32_t probe = 0; probe < kMaxProbe; ++probe) {
    Slot& s = slots_[(slot + probe) & (kCapacity - 1)];
    if (s.key.load(std::memory_order_relaxed) == 0) {
      free_slot = &s;
      break;
    }
  }
  if (free_slot == nullptr) return nullptr;

  const char* name = nullptr;
  CUfunction fn = static_cast<CUfunction>(const_cast<void*>(handle));
  if (aux.func_get_name == nullptr || aux.func_get_name(&name, fn) != CUDA_SUCCESS ||
      name == nullptr) {
    name = nullptr;
    if (aux.kernel_get_name != nullptr &&
        aux.kernel_get_name(&name, static_cast<CUkernel>(const_cast<void*>(handle))) !=
            CUDA_SUCCESS) {
      name = nullptr;
    }
  }
  char fallback[40];
  if (name == nullptr) {
    // Nameless handles still need distinct, stable identities.
    std::snprintf(fallback, sizeof(fallback), "kernel@%llx", static_cast<unsigned long long>(key));
    name = fallback;
  }
  auto* info = new KernelInfo();  // never deleted: readers hold it without a lock
  info->token = TokenForName(name);
  ReadLayout(handle, aux, info);
  free_slot->info = info;
  free_slot->key.store(key, std::memory_order_release);
  return info;
}

void KernelRegistry::AttachNames(ipc::NameTableWriter writer, bool valid,
                                 std::atomic<std::uint64_t>* dropped) {
  std::lock_guard<std::mutex> lock(mu_);
  writer_ = writer;
  writer_valid_ = valid;
  names_dropped_ = dropped;
  if (!valid) return;
  for (std::size_t i = 0; i < names_.size(); ++i) {
    const auto token = ipc::kFirstKernelToken + static_cast<std::uint32_t>(i);
    if (!writer_.Append(token, names_[i]) && dropped != nullptr) {
      dropped->fetch_add(1, std::memory_order_relaxed);
    }
  }
}

std::string KernelRegistry::NameOf(std::uint32_t token) {
  std::lock_guard<std::mutex> lock(mu_);
  if (token < ipc::kFirstKernelToken) return {};
  const std::size_t i = token - ipc::kFirstKernelToken;
  return i < names_.size() ? names_[i] : std::string();
}

}  // namespace chameleon::shim
