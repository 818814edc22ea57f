#include "init.h"

#include <pthread.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "call_counter.h"
#include "driver.h"
#include "fault_guard.h"
#include "fault_hook.h"
#include "stream.h"
#include "visible_devices.h"

namespace chameleon::simgpu {
namespace {

void ReportAtExit() {
  Driver* d = TheDriver();
  if (!d) return;
  for (auto& dev : d->devices) {
    std::fprintf(stderr,
                 "simgpu: device %d physical peak %llu bytes (capacity %llu), virtual %llu ns\n",
                 dev->ordinal, static_cast<unsigned long long>(dev->peak.load()),
                 static_cast<unsigned long long>(dev->capacity),
                 static_cast<unsigned long long>(dev->frontier.Now()));
  }
  std::fprintf(stderr, "simgpu: pinned host peak %llu bytes, host virtual %llu ns\n",
               static_cast<unsigned long long>(d->pinned_peak.load()),
               static_cast<unsigned long long>(HostClock().Now()));
}

// fork(): lock order fault handler -> counters -> registry -> contexts -> their streams, as
// everywhere else (workers install the fault handler before taking any other lock).
std::vector<std::shared_ptr<Stream>>* g_fork_streams = nullptr;

void ForkPrepare() {
  Driver* d = TheDriver();
  LockFaultHandlerForFork();
  detail::LockCountersForFork();
  d->registry.LockForFork();
  g_fork_streams = new std::vector<std::shared_ptr<Stream>>;
  for (auto& dev : d->devices) {
    dev->primary->mu.lock();
    for (auto& s : dev->primary->streams) g_fork_streams->push_back(s);
  }
  for (auto& s : *g_fork_streams) s->LockForFork();
}

void ForkRelease(bool child) {
  Driver* d = TheDriver();
  for (auto& s : *g_fork_streams) {
    if (child) s->ResetInForkChild();
    s->UnlockAfterFork();
  }
  delete g_fork_streams;
  g_fork_streams = nullptr;
  for (auto& dev : d->devices) dev->primary->mu.unlock();
  if (child) {
    d->registry.ResetLockInForkChild();
    // The child is another process of the node: it charges through a slot of its own, and what
    // it inherited stays charged to its parent (which still holds it).
    BeginChargeEpochInForkChild();
    if (d->ledger) d->ledger->ReattachInChild();
  } else {
    d->registry.UnlockAfterFork();
  }
  detail::UnlockCountersAfterFork();
  UnlockFaultHandlerAfterFork();
}

void ForkParent() { ForkRelease(false); }
void ForkChild() { ForkRelease(true); }

Driver* Build(const Config& cfg, std::unique_ptr<NodeLedger> ledger) {
  auto* d = new Driver;
  d->config = cfg;
  d->ledger = std::move(ledger);
  d->numa_count = static_cast<int>(cfg.host_numa_bytes.size());
  d->numa_links = std::make_unique<Link[]>(cfg.host_numa_bytes.size() * cfg.host_numa_bytes.size());
  for (int i = 0; i < cfg.device_count; ++i) {
    auto dev = std::make_unique<Device>();
    dev->ordinal = i;
    dev->node_index = cfg.node_index[static_cast<std::size_t>(i)];
    dev->ledger = d->ledger.get();
    dev->capacity = cfg.memory_bytes[static_cast<std::size_t>(i)];
    dev->peer_out = std::make_unique<Link[]>(static_cast<std::size_t>(cfg.device_count));
    auto* ctx = new Context;
    ctx->device = dev.get();
    ctx->legacy = std::make_shared<Stream>(ctx, 0u, 0, Stream::Role::kLegacy);
    ctx->streams.push_back(ctx->legacy);
    dev->primary = ctx;
    d->devices.push_back(std::move(dev));
  }
  return d;
}

// Every VMM chunk is a memfd (so that it can be exported as a file descriptor, as a real
// driver's shareable handle is), and an LLM-scale run maps tens of thousands of 2 MiB chunks:
// 80 GB is 40 k descriptors, past a typical soft limit (1024) and this project's CI hard limit
// (20 000). Raise the soft limit to the hard one, and the hard one as far as the kernel allows
// when we may (root); failures leave the limits as they were and surface later as
// CUDA_ERROR_OUT_OF_MEMORY from cuMemCreate, never as a crash.
void RaiseDescriptorLimit() {
  rlimit lim{};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0) return;
  rlim_t want = lim.rlim_max;
  if (std::FILE* f = std::fopen("/proc/sys/fs/nr_open", "r")) {
    unsigned long long nr_open = 0;
    if (std::fscanf(f, "%llu", &nr_open) == 1 && nr_open > want) want = nr_open;
    std::fclose(f);
  }
  rlimit raised{want, want};
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return;
  raised = {lim.rlim_max, lim.rlim_max};
  setrlimit(RLIMIT_NOFILE, &raised);
}

// The configuration as this process sees it, and its node ledger (SIMGPU_NODE). "" or the
// message of cuInit's error line; `*no_device` for an empty CUDA_VISIBLE_DEVICES.
std::string Configure(Config* cfg, std::unique_ptr<NodeLedger>* ledger, bool* no_device) {
  std::string error = LoadConfig(cfg);
  if (error.empty()) error = LoadFaultHook();
  if (!error.empty()) return error;
  // Every process of a node agrees on all node devices, whichever of them it sees.
  const NodeLedger::Identity node{cfg->machine, cfg->memory_bytes};
  if (error = ApplyVisibleDevices(cfg, no_device); !error.empty()) return error;
  if (!cfg->node_name.empty()) error = NodeLedger::Open(cfg->node_name, node, ledger);
  return error;
}

}  // namespace

CUresult InitDriver() {
  static std::once_flag once;
  static CUresult result = CUDA_SUCCESS;
  std::call_once(once, [] {
    Config cfg;
    std::unique_ptr<NodeLedger> ledger;
    bool no_device = false;
    if (std::string error = Configure(&cfg, &ledger, &no_device); !error.empty()) {
      std::fprintf(stderr, "simgpu: cuInit failed: %s\n", error.c_str());
      result = no_device ? CUDA_ERROR_NO_DEVICE : CUDA_ERROR_INVALID_VALUE;
      return;
    }
    RaiseDescriptorLimit();
    InstallDriver(Build(cfg, std::move(ledger)), cfg.host_call_ns);
    pthread_atfork(ForkPrepare, ForkParent, ForkChild);
    if (cfg.report) std::atexit(ReportAtExit);
  });
  return result;
}

}  // namespace chameleon::simgpu
