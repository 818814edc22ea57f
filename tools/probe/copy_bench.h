// Copy bandwidth between pinned host memory and each device, and between device pairs, timed
// with CUDA events on one stream per device (on simgpu that is virtual time, so the figures are
// the configured links'). Owns the contexts, streams, events and device buffers; not thread-safe.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "figures.h"
#include "probe_driver.h"

namespace chameleon::probe {

class CopyBench {
 public:
  /// Retains each device's primary context and allocates `bytes` on it.
  CopyBench(const ProbeDriver& driver, const std::vector<int>& devices, std::uint64_t bytes,
            int trials);
  ~CopyBench();
  CopyBench(const CopyBench&) = delete;
  CopyBench& operator=(const CopyBench&) = delete;

  /// H2D and D2H of every device against pinned memory on each of `numa_nodes`.
  std::vector<HostLinkFigure> HostLinks(const std::vector<int>& numa_nodes);

  /// Every ordered pair of the devices (cuMemcpyPeerAsync, peer access enabled where possible).
  std::vector<PeerFigure> PeerLinks();

 private:
  struct Device {
    CUdevice device = 0;
    CUcontext context = nullptr;
    CUstream stream = nullptr;
    CUevent start = nullptr;
    CUevent end = nullptr;
    CUdeviceptr buffer = 0;
  };

  /// Issues one copy of `bytes` on `stream`.
  using CopyFn = std::function<CUresult(CUstream stream, std::size_t bytes)>;

  /// Bytes/s of `copy` on `d`'s stream after one untimed run: the slope between the medians of
  /// `trials` timed copies of --bytes and of half as many.
  double Bandwidth(const Device& d, const CopyFn& copy);
  /// Median seconds (event time) of `trials` copies of `bytes`.
  double MedianSeconds(const Device& d, const CopyFn& copy, std::size_t bytes);

  const ProbeDriver& driver_;
  std::uint64_t bytes_;
  int trials_;
  std::vector<Device> devices_;
};

}  // namespace chameleon::probe
