// pointer_scan_bench: the pointer-table scanner's host-side cost (shim/src/swap/pointer_scan.h)
// against its baseline, a plain memcpy of the same bytes (the floor: the scan must at least read
// every sampled byte once, and the driver path already pays one copy into the staging buffer).
//
//   ScanWords/<kind>/<bytes>   the word scan alone over data of one kind, 8 Ki tracked ranges
//   Memcpy/<bytes>             memcpy of the same bytes
//   ScanSamples/<ranges>/<staging KiB>  the whole pipeline (plan, batched copy from "device" = host
//                              memory, scan, merge) over many allocations of mixed sizes
//   MemcpySamples/<ranges>     memcpy of exactly the bytes ScanSamples copied, same batches
//
//   build-*/bench/pointer_scan_bench --benchmark_repetitions=5
//   --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "swap/pointer_scan.h"

namespace {

namespace sw = chameleon::shim::swap;

constexpr std::uint64_t kDeviceBase = 0x7f0000000000ull;  // where CUDA / simgpu VAs live

// 8 Ki tracked ranges of 64 KiB .. 2 MiB with gaps, at device-like addresses.
std::vector<sw::Range> TrackedRanges(std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<sw::Range> ranges;
  std::uint64_t at = kDeviceBase;
  for (int i = 0; i < 8192; ++i) {
    const std::uint64_t bytes = (64u << 10) << (rng() % 6);
    ranges.push_back({at, bytes});
    at += bytes + ((rng() % 4) << 20);
  }
  return ranges;
}

enum Kind { kZeros = 0, kFloats = 1, kPointers = 2 };

// kZeros: fresh memory; kFloats: fp32 activations/weights (the bulk of real tensors);
// kPointers: floats with one in 64 words a pointer into a tracked range (a table-heavy worst case).
std::vector<std::uint64_t> Data(Kind kind, std::size_t bytes, const std::vector<sw::Range>& r) {
  std::vector<std::uint64_t> w(bytes / 8, 0);
  if (kind == kZeros) return w;
  // 64 KiB of normally distributed floats, repeated (generating gigabytes would dominate).
  static const std::vector<std::uint64_t> floats = [] {
    std::mt19937_64 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<std::uint64_t> f((64u << 10) / 8);
    for (auto& x : f) {
      const float pair[2] = {normal(rng), normal(rng)};
      std::memcpy(&x, pair, 8);
    }
    return f;
  }();
  for (std::size_t i = 0; i < w.size(); i += floats.size())
    std::memcpy(&w[i], floats.data(), std::min(floats.size(), w.size() - i) * 8);
  std::mt19937_64 rng(9);
  if (kind == kPointers)
    for (std::size_t i = 0; i < w.size(); i += 64) w[i] = r[rng() % r.size()].base + 64;
  return w;
}

void BM_ScanWords(benchmark::State& state) {
  const auto kind = static_cast<Kind>(state.range(0));
  const auto bytes = static_cast<std::size_t>(state.range(1));
  const auto ranges = TrackedRanges();
  const sw::RangeIndex index(ranges);
  const auto data = Data(kind, bytes, ranges);
  std::vector<sw::PointerLink> links;
  links.reserve(bytes / 8);
  std::uint64_t found = 0;
  for (auto _ : state) {
    links.clear();
    // Scanned as if copied from a range not in the index (every hit is reported).
    benchmark::DoNotOptimize(sw::ScanWords(reinterpret_cast<const unsigned char*>(data.data()),
                                           bytes, 0x1000, ~0u, index, &links));
    found = links.size();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
  state.counters["links"] = static_cast<double>(found);
}
BENCHMARK(BM_ScanWords)->ArgsProduct({{kZeros, kFloats, kPointers}, {64 << 10, 16 << 20}});

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  std::vector<unsigned char> src(bytes, 1), dst(bytes);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_Memcpy)->Arg(64 << 10)->Arg(16 << 20);

// Host memory standing in for a device: n allocations of 256 B .. 1 MiB, float data, a few
// small pointer tables. Ranges are the real host addresses, so the copy is a memcpy.
struct HostDevice {
  std::vector<std::vector<std::uint64_t>> buffers;
  std::vector<sw::Range> ranges;
  explicit HostDevice(int n) {
    std::mt19937_64 rng(3);
    for (int i = 0; i < n; ++i) {
      const std::size_t bytes = std::size_t{256} << (rng() % 13);  // 256 B .. 1 MiB
      buffers.push_back(Data(kFloats, bytes, {}));
      ranges.push_back({reinterpret_cast<std::uint64_t>(buffers.back().data()), bytes});
    }
    for (int i = 0; i < n; i += 16) {  // every 16th allocation starts with a table
      auto& b = buffers[static_cast<std::size_t>(i)];
      for (std::size_t k = 0; k < std::min<std::size_t>(b.size(), 8); ++k)
        b[k] = ranges[(static_cast<std::size_t>(i) + k + 1) % ranges.size()].base;
    }
  }
};

class HostSource final : public sw::SampleSource {
 public:
  CUresult Copy(void* dst, CUdeviceptr src, std::size_t bytes) override {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
  }
  CUresult Wait() override { return CUDA_SUCCESS; }
};

void BM_ScanSamples(benchmark::State& state) {
  const HostDevice dev(static_cast<int>(state.range(0)));
  sw::ScanOptions options;
  options.staging_bytes = static_cast<std::uint64_t>(state.range(1)) << 10;
  std::vector<unsigned char> staging(options.staging_bytes);
  HostSource source;
  sw::ScanResult r;
  for (auto _ : state) {
    r = sw::ScanSamples(dev.ranges, options, &source, staging.data());
    benchmark::DoNotOptimize(r.targets.data());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * r.stats.bytes_copied));
  state.counters["sampled_KiB"] = static_cast<double>(r.stats.bytes_copied) / 1024;
  state.counters["targets"] = static_cast<double>(r.targets.size());
}
BENCHMARK(BM_ScanSamples)->ArgsProduct({{256, 2048}, {64, 256, 1024}});

void BM_MemcpySamples(benchmark::State& state) {
  const HostDevice dev(static_cast<int>(state.range(0)));
  sw::ScanOptions options;
  sw::ScanStats stats;
  const auto plan = sw::PlanSamples(dev.ranges, options, &stats);
  std::vector<unsigned char> staging(options.staging_bytes);
  std::uint64_t bytes = 0;
  for (auto _ : state) {
    std::size_t used = 0;
    bytes = 0;
    for (const sw::Segment& s : plan) {
      const auto* src = reinterpret_cast<const unsigned char*>(dev.ranges[s.range].base) + s.offset;
      for (std::uint64_t done = 0; done < s.bytes;) {
        if (used == staging.size()) used = 0;
        const std::size_t n = std::min<std::size_t>(s.bytes - done, staging.size() - used);
        std::memcpy(staging.data() + used, src + done, n);
        used += n;
        done += n;
      }
      bytes += s.bytes;
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes));
}
BENCHMARK(BM_MemcpySamples)->Arg(256)->Arg(2048);

}  // namespace

BENCHMARK_MAIN();
