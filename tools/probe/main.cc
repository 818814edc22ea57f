// chameleon-probe: measures a machine's links and VMM latency, to calibrate simgpu's models on it
// (docs/operations.md "Measuring the machine"). Driver API only, no kernels: runs on simgpu and
// on any GPU.
#include <cstdio>
#include <exception>
#include <set>

#include "chameleon/driver_loader/driver_loader.h"
#include "copy_bench.h"
#include "probe_options.h"
#include "report.h"
#include "vmm_latency.h"

namespace {

using namespace chameleon::probe;

int NumaNode(const ProbeDriver& d, int device) {
  CUdevice dev = 0;
  int node = -1;
  if (d.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
      d.cuDeviceGetAttribute(&node, CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, dev) != CUDA_SUCCESS)
    return -1;
  return node < 0 ? -1 : node;
}

ProbeFigures Measure(const ProbeDriver& driver, const ProbeOptions& o, int count) {
  ProbeFigures f;
  f.device_count = count;
  f.bytes = o.bytes;
  f.trials = o.trials;
  f.devices = o.devices;
  if (f.devices.empty())
    for (int i = 0; i < count; ++i) f.devices.push_back(i);
  char name[256] = {};
  CUdevice first = 0;
  driver.Check(driver.cuDeviceGet(&first, f.devices.front()), "cuDeviceGet");
  driver.Check(driver.cuDeviceGetName(name, sizeof name - 1, first), "cuDeviceGetName");
  f.device_name = name;
  for (int i = 0; i < count; ++i) f.numa_of_device.push_back(NumaNode(driver, i));
  std::set<int> nodes;  // the NUMA nodes the measured GPUs sit on, each probed from every GPU
  for (int d : f.devices) nodes.insert(f.numa_of_device[static_cast<std::size_t>(d)]);
  {
    CopyBench bench(driver, f.devices, o.bytes, o.trials);
    f.host = bench.HostLinks({nodes.begin(), nodes.end()});
    f.peer = bench.PeerLinks();
  }
  f.vmm = MeasureVmmLatency(driver, f.devices.front(), o.trials, &f.vmm_chunk_bytes);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = ParseProbeOptions(argc, argv);
  if (parsed.options.help) {
    std::fputs(ProbeUsage(), stdout);
    return 0;
  }
  if (!parsed.error.empty()) {
    std::fprintf(stderr, "chameleon-probe: %s\n%s", parsed.error.c_str(), ProbeUsage());
    return 2;
  }
  try {
    const ProbeDriver driver = LoadProbeDriver();
    int count = 0;
    driver.Check(driver.cuDeviceGetCount(&count), "cuDeviceGetCount");
    if (count <= 0) {
      std::fprintf(stderr, "chameleon-probe: no CUDA device\n");
      return 1;
    }
    if (const std::string err = CheckDevices(parsed.options.devices, count); !err.empty()) {
      std::fprintf(stderr, "chameleon-probe: %s\n", err.c_str());
      return 2;
    }
    const ProbeFigures f = Measure(driver, parsed.options, count);
    std::fputs((parsed.options.yaml ? FormatYaml(f) : FormatTable(f)).c_str(), stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chameleon-probe: %s\n", e.what());
    return 1;
  }
}
