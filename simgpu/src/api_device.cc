// Initialisation, versions, devices and their attributes.
#include <cstdio>
#include <cstring>

#include "api.h"
#include "init.h"
#include "visible_devices.h"

using namespace chameleon::simgpu;

namespace {

// A100-SXM4-80GB values, the GPU of the calibration trace (docs/simgpu.md); others read as 0.
int AttributeValue(CUdevice_attribute a, const Device& dev) {
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      return 49152;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      return 166912;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      return 167936;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      return 1410000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return 108;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      return 0;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      return CU_COMPUTEMODE_DEFAULT;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      return 1;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:  // the node device's: the same in every process
      return 0x18 + dev.node_index;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      return 0;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      return 1593000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      return 41943040;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return 8;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      return 32;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID:
      return dev.node_index;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
      return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES:
      return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE:
      return 31457280;
    case CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE:
      return 134213632;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK:
      return 1024;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
      return 1;
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID:
      return TheDriver()->config.numa_node[static_cast<std::size_t>(dev.ordinal)];
    default:
      return 0;
  }
}

}  // namespace

SIMGPU_API CUresult cuInit(unsigned int flags) try {
  SIMGPU_ENTRY();
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  return InitDriver();
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDriverGetVersion(int* version) try {
  SIMGPU_ENTRY();
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGet(CUdevice* device, int ordinal) try {
  SIMGPU_ENTRY();
  if (!device) return CUDA_ERROR_INVALID_VALUE;
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(ordinal, &dev));
  *device = ordinal;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetCount(int* count) try {
  SIMGPU_ENTRY();
  if (!count) return CUDA_ERROR_INVALID_VALUE;
  if (!TheDriver()) return CUDA_ERROR_NOT_INITIALIZED;
  *count = static_cast<int>(TheDriver()->devices.size());
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetName(char* name, int len, CUdevice device) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<std::size_t>(len), "simgpu %d (simulated A100-SXM4-80GB)",
                device);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attrib,
                                         CUdevice device) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!value || attrib < 1 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  *value = AttributeValue(attrib, *dev);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = dev->capacity;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

static CUresult DeviceUuid(CUuuid* uuid, CUdevice device) {
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  const auto bytes = NodeDeviceUuid(dev->node_index);  // the node device's, as CVD names it
  std::memcpy(uuid->bytes, bytes.data(), sizeof uuid->bytes);
  return CUDA_SUCCESS;
}

SIMGPU_API CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice device) try {
  SIMGPU_ENTRY();
  return DeviceUuid(uuid, device);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice device) try {
  SIMGPU_ENTRY();
  return DeviceUuid(uuid, device);
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetPCIBusId(char* id, int len, CUdevice device) try {
  SIMGPU_ENTRY();
  Device* dev = nullptr;
  SIMGPU_TRY(GetDevice(device, &dev));
  if (!id || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(id, static_cast<std::size_t>(len), "0000:%02x:00.0", 0x18 + dev->node_index);
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer) try {
  SIMGPU_ENTRY();
  Device* a = nullptr;
  Device* b = nullptr;
  SIMGPU_TRY(GetDevice(dev, &a));
  SIMGPU_TRY(GetDevice(peer, &b));
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  *can = dev != peer && TheDriver()->config.peer_bandwidth[static_cast<std::size_t>(dev)]
                                                          [static_cast<std::size_t>(peer)] > 0;
  return CUDA_SUCCESS;
}
SIMGPU_CATCH

SIMGPU_API CUresult cuDeviceGetP2PAttribute(int* value, CUdevice_P2PAttribute attrib, CUdevice src,
                                            CUdevice dst) try {
  SIMGPU_ENTRY();
  Device* a = nullptr;
  Device* b = nullptr;
  SIMGPU_TRY(GetDevice(src, &a));
  SIMGPU_TRY(GetDevice(dst, &b));
  if (!value || src == dst) return CUDA_ERROR_INVALID_DEVICE;
  const bool link =
      TheDriver()
          ->config.peer_bandwidth[static_cast<std::size_t>(src)][static_cast<std::size_t>(dst)] > 0;
  switch (attrib) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK:
      *value = link ? 0 : 1;
      break;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED:
      *value = link ? 1 : 0;
      break;
    case CU_DEVICE_P2P_ATTRIBUTE_ONLY_PARTIAL_NATIVE_ATOMIC_SUPPORTED:
      *value = 0;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
SIMGPU_CATCH
