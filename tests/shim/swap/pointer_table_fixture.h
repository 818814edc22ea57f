// Fixture for the pointer-table tests: SwapFixture plus simgpu's gather_via_table kernel, plain
// (pass-through) allocations for tables and outputs, and the pressure scenario that decides
// whether a table's target survives: with the scanner's targets pinned, or without.
#pragma once

#include <vector>

#include "chameleon/simgpu/pointer_table_kernel.h"
#include "sim_fixture.h"
#include "swap/pointer_scan.h"

namespace swap_test {

inline const KernelEntry kTableKernels[] = {chameleon::simgpu::kGatherViaTableKernel};
inline const ModuleImage kTableImage{chameleon::simgpu::kModuleImageMagic,
                                     chameleon::simgpu::kModuleImageVersion, 1, 0, kTableKernels};

class PointerTableFixture : public SwapFixture {
 protected:
  static constexpr std::size_t kTarget = 4 * kMiB;
  static constexpr std::uint64_t kEntries = 4;         // table entries: T + k MiB
  static constexpr std::uint64_t kEntryBytes = 65536;  // gathered from each
  static constexpr std::uint32_t kSeed = 7;

  void SetUp() override {
    SwapFixture::SetUp();
    if (HasFatalFailure()) return;
    Sym("cuMemAlloc_v2", &mem_alloc_);
    CUmodule m = nullptr;
    ASSERT_CU(module_load_(&m, &kTableImage));
    ASSERT_CU(module_get_function_(&gather_, m, chameleon::simgpu::kGatherViaTableName));
  }

  /// A pass-through allocation (what the shim does for anything under 2 MiB), zeroed.
  CUdeviceptr Plain(std::size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_CU(mem_alloc_(&p, bytes));
    std::vector<unsigned char> zeros(bytes, 0);
    EXPECT_CU(htod_(p, zeros.data(), bytes));
    return p;
  }
  CUdeviceptr Table(const std::vector<CUdeviceptr>& entries) {
    const CUdeviceptr t = Plain(entries.size() * 8);
    EXPECT_CU(htod_(t, entries.data(), entries.size() * 8));
    return t;
  }
  void WriteWord(CUdeviceptr at, std::uint64_t value) { EXPECT_CU(htod_(at, &value, 8)); }
  CUresult Gather(CUdeviceptr table, std::uint64_t n, std::uint64_t bytes, CUdeviceptr out,
                  CUstream s) {
    void* args[] = {&table, &n, &bytes, &out};
    return launch_(gather_, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  /// What the shim's safety net does for a launch: fault in every argument that names a
  /// swapped-out executor allocation. The gather's arguments are the table and the output.
  void SafetyNet(std::initializer_list<CUdeviceptr> args) {
    for (CUdeviceptr p : args) {
      const sw::AllocId id = engine_->Find(p);
      if (id != 0 && engine_->State(id) == sw::Residency::kSwappedOut) {
        EXPECT_CU(engine_->FaultIn(id));
      }
    }
  }
  /// Words of the gathered output that differ from what the table's target held.
  std::uint64_t OutputMismatches(CUdeviceptr out) {
    std::vector<std::uint32_t> host(kEntries * kEntryBytes / 4);
    EXPECT_CU(dtoh_(host.data(), out, host.size() * 4));
    std::uint64_t bad = 0;
    for (std::uint64_t k = 0; k < kEntries; ++k)
      for (std::uint64_t j = 0; j < kEntryBytes / 4; ++j)
        bad += host[k * kEntryBytes / 4 + j] != Pattern(kSeed, k * kMiB / 4 + j);
    return bad;
  }

  /// The scenario of tests (a) and (b). Limit 8 MiB. T (4 MiB, executor) is reached only
  /// through a table (plain); the scan runs, its targets are pinned if `pin`; then U and V
  /// (4 MiB each) put the device under pressure: V's allocation evicts the closest-size resident
  /// tensor (T or U: equal sizes, oldest first — T unless pinned) and overwrites the chunks.
  /// `flush`: unmap swapped-out ranges first (an iteration boundary). Then the gather runs after
  /// the safety net. Returns the launch's synchronisation result; mismatches in *mismatches.
  CUresult PressureScenario(bool pin, bool flush, std::uint64_t* mismatches) {
    sw::SwapEngineOptions options;
    options.device_limit_bytes = 8 * kMiB;
    StartEngine(options);
    EXPECT_CU(engine_->Allocate(kTarget, compute_, &t_, &id_t_));
    EXPECT_CU(Fill(t_, kTarget, kSeed, compute_));
    std::vector<CUdeviceptr> entries;
    for (std::uint64_t k = 0; k < kEntries; ++k) entries.push_back(t_ + k * kMiB);
    table_ = Table(entries);
    out_ = Plain(kEntries * kEntryBytes);
    EXPECT_CU(ctx_sync_());  // the scan reads what the iteration wrote
    const std::vector<sw::Range> ranges = {
        {t_, kTarget}, {table_, kEntries * 8}, {out_, kEntries * kEntryBytes}};
    targets_ = sw::FindPointerTargets(api_, ranges, sw::ScanOptions{});
    if (pin)
      for (CUdeviceptr target : targets_) engine_->SetPinned(engine_->Find(target), true);
    EXPECT_CU(engine_->Allocate(4 * kMiB, compute_, &u_, &id_u_));
    EXPECT_CU(Fill(u_, 4 * kMiB, 20, compute_));
    EXPECT_CU(engine_->Allocate(4 * kMiB, compute_, &v_, &id_v_));
    EXPECT_CU(Fill(v_, 4 * kMiB, 30, compute_));
    if (flush) {
      EXPECT_CU(ctx_sync_());
      engine_->FlushUnmaps();
    }
    SafetyNet({table_, out_});
    EXPECT_CU(Gather(table_, kEntries, kEntryBytes, out_, compute_));
    const CUresult r = stream_sync_(compute_);
    *mismatches = r == CUDA_SUCCESS ? OutputMismatches(out_) : ~0ull;
    return r;
  }

  CUresult (*mem_alloc_)(CUdeviceptr*, size_t) = nullptr;
  CUfunction gather_ = nullptr;
  CUdeviceptr t_ = 0, u_ = 0, v_ = 0, table_ = 0, out_ = 0;
  sw::AllocId id_t_ = 0, id_u_ = 0, id_v_ = 0;
  std::vector<CUdeviceptr> targets_;
};

}  // namespace swap_test
