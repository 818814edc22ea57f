#include "host_buffer.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>

namespace chameleon::probe {
namespace {

constexpr int kMpolBind = 2;  // MPOL_BIND (linux/mempolicy.h), no libnuma needed
constexpr unsigned kMpolMfStrict = 1u << 0;
constexpr unsigned kMpolMfMove = 1u << 1;
constexpr int kMaxMbindNode = 1023;

std::size_t RoundUp(std::size_t v, std::size_t to) { return (v + to - 1) / to * to; }

}  // namespace

const char* BindingName(Binding binding) {
  switch (binding) {
    case Binding::kVmmHostNuma:
      return "vmm-host-numa";
    case Binding::kMbind:
      return "mbind";
    case Binding::kUnbound:
      break;
  }
  return "unbound";
}

PinnedHostBuffer::PinnedHostBuffer(const ProbeDriver& driver, int node, std::size_t bytes,
                                   const std::vector<CUdevice>& devices)
    : driver_(driver), bytes_(bytes) {
  if (node >= 0 && TryVmm(node, devices)) return;
  if (node >= 0 && TryMbind(node)) return;
  driver_.Check(driver_.cuMemHostAlloc(&data_, bytes_, CU_MEMHOSTALLOC_PORTABLE),
                "cuMemHostAlloc(" + std::to_string(bytes_) + ")");
  binding_ = Binding::kUnbound;
}

PinnedHostBuffer::~PinnedHostBuffer() {
  if (handle_ != 0) {
    const auto va = reinterpret_cast<CUdeviceptr>(data_);
    driver_.cuMemUnmap(va, mapped_bytes_);
    driver_.cuMemRelease(handle_);
    driver_.cuMemAddressFree(va, mapped_bytes_);
  } else if (registered_) {
    driver_.cuMemHostUnregister(data_);
    ::munmap(data_, bytes_);
  } else if (data_ != nullptr) {
    driver_.cuMemFreeHost(data_);
  }
}

bool PinnedHostBuffer::TryVmm(int node, const std::vector<CUdevice>& devices) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, node};
  std::size_t granularity = 0;
  if (driver_.cuMemGetAllocationGranularity(&granularity, &prop,
                                            CU_MEM_ALLOC_GRANULARITY_MINIMUM) != CUDA_SUCCESS ||
      granularity == 0)
    return false;
  mapped_bytes_ = RoundUp(bytes_, granularity);
  CUdeviceptr va = 0;
  if (driver_.cuMemAddressReserve(&va, mapped_bytes_, 0, 0, 0) != CUDA_SUCCESS) return false;
  CUmemGenericAllocationHandle h = 0;
  bool ok = driver_.cuMemCreate(&h, mapped_bytes_, &prop, 0) == CUDA_SUCCESS;
  bool mapped = ok && driver_.cuMemMap(va, mapped_bytes_, 0, h, 0) == CUDA_SUCCESS;
  std::vector<CUmemAccessDesc> access;
  access.reserve(devices.size());
  for (CUdevice d : devices)
    access.push_back({{CU_MEM_LOCATION_TYPE_DEVICE, d}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE});
  ok = mapped &&
       driver_.cuMemSetAccess(va, mapped_bytes_, access.data(), access.size()) == CUDA_SUCCESS;
  if (!ok) {
    if (mapped) driver_.cuMemUnmap(va, mapped_bytes_);
    if (h != 0) driver_.cuMemRelease(h);
    driver_.cuMemAddressFree(va, mapped_bytes_);
    return false;
  }
  handle_ = h;
  data_ = reinterpret_cast<void*>(va);
  binding_ = Binding::kVmmHostNuma;
  return true;
}

bool PinnedHostBuffer::TryMbind(int node) {
  if (node > kMaxMbindNode) return false;
  void* p = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return false;
  unsigned long mask[(kMaxMbindNode + 1) / (8 * sizeof(unsigned long))] = {};
  mask[static_cast<unsigned>(node) / (8 * sizeof(unsigned long))] |=
      1ul << (static_cast<unsigned>(node) % (8 * sizeof(unsigned long)));
  // Bound before the first touch, so the pages are allocated on `node`.
  const bool bound = ::syscall(SYS_mbind, p, bytes_, kMpolBind, mask, kMaxMbindNode + 1,
                               kMpolMfStrict | kMpolMfMove) == 0;
  std::memset(p, 0, bytes_);
  if (driver_.cuMemHostRegister(p, bytes_, CU_MEMHOSTREGISTER_PORTABLE) != CUDA_SUCCESS) {
    ::munmap(p, bytes_);
    return false;
  }
  data_ = p;
  registered_ = true;
  binding_ = bound ? Binding::kMbind : Binding::kUnbound;
  return true;
}

}  // namespace chameleon::probe
