#include "swap/pointer_scan.h"

#include <algorithm>
#include <cstring>

namespace chameleon::shim::swap {
namespace {

constexpr std::uint64_t AlignDown8(std::uint64_t v) { return v & ~std::uint64_t{7}; }
constexpr std::uint64_t AlignUp8(std::uint64_t v) { return (v + 7) & ~std::uint64_t{7}; }

struct Piece {
  std::uint64_t offset;
  std::uint64_t bytes;
};

// Head, tail and the strided windows of one range (or the whole range when it is small).
// Appends in priority order: head, tail, then the windows front to back.
void RangePieces(std::uint64_t bytes, const ScanOptions& o, std::vector<Piece>* out) {
  out->clear();
  const std::uint64_t full =
      o.head_bytes + o.tail_bytes + std::uint64_t{o.windows} * o.window_bytes;
  if (bytes <= full) {
    out->push_back({0, bytes});
    return;
  }
  // bytes > head + tail here, so both fit and do not overlap.
  if (o.head_bytes > 0) out->push_back({0, o.head_bytes});
  const std::uint64_t tail_start = AlignDown8(bytes - o.tail_bytes);
  if (o.tail_bytes > 0) out->push_back({tail_start, bytes - tail_start});
  const std::uint64_t lo = AlignUp8(o.head_bytes);
  if (o.windows == 0 || o.window_bytes == 0 || tail_start <= lo) return;
  const std::uint64_t slice = (tail_start - lo) / o.windows;
  const std::uint64_t len = std::min(o.window_bytes, slice);
  if (len == 0) return;
  for (std::uint32_t k = 0; k < o.windows; ++k) {
    // Centred in slice k; aligned up so that windows never start inside the previous slice.
    const std::uint64_t start = AlignUp8(lo + k * slice + (slice - len) / 2);
    if (start >= tail_start) break;
    out->push_back({start, std::min(len, tail_start - start)});
  }
}

// One candidate word: a link if it points into another tracked range.
inline void Classify(std::uint64_t word, std::uint32_t source, const RangeIndex& index,
                     std::vector<PointerLink>* links) {
  const std::int64_t t = index.Find(word);
  if (t < 0 || static_cast<std::uint32_t>(t) == source) return;
  const auto target = static_cast<std::uint32_t>(t);
  if (!links->empty() && links->back().table == source && links->back().target == target) {
    ++links->back().count;
    return;
  }
  links->push_back({source, target, 1});
}

void MergeLinks(std::vector<PointerLink>* links) {
  std::sort(links->begin(), links->end(), [](const PointerLink& a, const PointerLink& b) {
    return a.table != b.table ? a.table < b.table : a.target < b.target;
  });
  std::size_t out = 0;
  for (std::size_t i = 0; i < links->size(); ++i) {
    if (out > 0 && (*links)[out - 1].table == (*links)[i].table &&
        (*links)[out - 1].target == (*links)[i].target) {
      (*links)[out - 1].count += (*links)[i].count;
    } else {
      (*links)[out++] = (*links)[i];
    }
  }
  links->resize(out);
}

// Copies through the driver: DtoH on one stream, an event wait per batch.
class DriverSource final : public SampleSource {
 public:
  DriverSource(const DriverApi& api, CUstream stream, CUevent done)
      : api_(api), stream_(stream), done_(done) {}
  CUresult Copy(void* dst, CUdeviceptr src, std::size_t bytes) override {
    return api_.memcpy_dtoh_async(dst, src, bytes, stream_);
  }
  CUresult Wait() override {
    const CUresult r = api_.event_record(done_, stream_);
    return r != CUDA_SUCCESS ? r : api_.event_synchronize(done_);
  }

 private:
  const DriverApi& api_;
  CUstream stream_;
  CUevent done_;
};

}  // namespace

RangeIndex::RangeIndex(std::span<const Range> ranges) {
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].bytes > 0) order.push_back(i);
  std::sort(order.begin(), order.end(),
            [&](std::uint32_t a, std::uint32_t b) { return ranges[a].base < ranges[b].base; });
  for (std::uint32_t i : order) {
    starts_.push_back(ranges[i].base);
    ends_.push_back(ranges[i].base + ranges[i].bytes);
    index_.push_back(i);
  }
  if (!order.empty()) {
    lo_ = starts_.front();
    span_ = *std::max_element(ends_.begin(), ends_.end()) - lo_;
  }
}

std::int64_t RangeIndex::Find(std::uint64_t address) const {
  if (address - lo_ >= span_) return -1;
  const auto it = std::upper_bound(starts_.begin(), starts_.end(), address);
  if (it == starts_.begin()) return -1;
  const auto pos = static_cast<std::size_t>(it - starts_.begin()) - 1;
  return address < ends_[pos] ? static_cast<std::int64_t>(index_[pos]) : -1;
}

std::vector<Segment> PlanSamples(std::span<const Range> ranges, const ScanOptions& options,
                                 ScanStats* stats) {
  std::vector<std::uint32_t> order;
  for (std::uint32_t i = 0; i < ranges.size(); ++i)
    if (ranges[i].scan && ranges[i].bytes > 0) order.push_back(i);
  // Smallest first: pointer tables are small (8 bytes an entry), and small ranges are read whole.
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return ranges[a].bytes != ranges[b].bytes ? ranges[a].bytes < ranges[b].bytes
                                              : ranges[a].base < ranges[b].base;
  });
  std::vector<Segment> plan;
  std::vector<Piece> pieces;
  std::uint64_t budget = options.budget_bytes;
  for (std::uint32_t i : order) {
    if (budget == 0) {
      ++stats->ranges_unsampled;
      continue;
    }
    RangePieces(ranges[i].bytes, options, &pieces);
    std::uint64_t taken = 0;
    for (const Piece& p : pieces) {
      const std::uint64_t n = std::min(p.bytes, budget);
      if (n == 0) break;
      plan.push_back({i, p.offset, n});
      budget -= n;
      taken += n;
    }
    ++stats->ranges_sampled;
    if (taken == ranges[i].bytes) ++stats->ranges_complete;
  }
  return plan;
}

std::uint64_t ScanWords(const unsigned char* data, std::size_t bytes, std::uint64_t address,
                        std::uint32_t source, const RangeIndex& index,
                        std::vector<PointerLink>* links) {
  // Words are aligned in device addresses (that is how pointers are stored); the host copy may sit
  // at any alignment, so words are loaded with memcpy.
  const std::uint64_t skip = (8 - (address & 7)) & 7;
  if (bytes <= skip) return 0;
  data += skip;
  const std::size_t n = (bytes - skip) / 8;
  const std::uint64_t lo = index.lo();
  const std::uint64_t span = index.span();
  std::size_t i = 0;
  // Blocks of 8 words: almost every word (zeros, floats, indices) is rejected, so one test per
  // block — the smallest word - lo (a min tree, 8 independent loads) against the span — keeps the
  // loop near memory speed; only a block holding a candidate is looked at word by word.
  auto delta = [&](std::size_t j) {
    std::uint64_t w;
    std::memcpy(&w, data + j * 8, sizeof(w));
    return w - lo;
  };
  for (; i + 8 <= n; i += 8) {
    const std::uint64_t m01 = std::min(delta(i), delta(i + 1));
    const std::uint64_t m23 = std::min(delta(i + 2), delta(i + 3));
    const std::uint64_t m45 = std::min(delta(i + 4), delta(i + 5));
    const std::uint64_t m67 = std::min(delta(i + 6), delta(i + 7));
    if (__builtin_expect(std::min(std::min(m01, m23), std::min(m45, m67)) < span, 0)) {
      for (std::size_t k = i; k < i + 8; ++k)
        if (delta(k) < span) Classify(delta(k) + lo, source, index, links);
    }
  }
  for (; i < n; ++i) {
    std::uint64_t w;
    std::memcpy(&w, data + i * 8, sizeof(w));
    if (w - lo < span) Classify(w, source, index, links);
  }
  return n;
}

ScanResult ScanSamples(std::span<const Range> ranges, const ScanOptions& options,
                       SampleSource* source, unsigned char* staging) {
  ScanResult result;
  const RangeIndex index(ranges);
  const std::vector<Segment> plan = PlanSamples(ranges, options, &result.stats);
  const std::uint64_t cap = AlignDown8(options.staging_bytes);
  if (cap == 0 && !plan.empty()) {
    result.error = CUDA_ERROR_INVALID_VALUE;
    return result;
  }
  struct Queued {
    std::uint32_t range;
    std::uint64_t address;
    std::uint64_t at;  // offset in staging
    std::uint64_t bytes;
  };
  std::vector<Queued> batch;
  std::uint64_t used = 0;
  auto flush = [&]() -> CUresult {
    if (batch.empty()) return CUDA_SUCCESS;
    if (const CUresult r = source->Wait(); r != CUDA_SUCCESS) return r;
    ++result.stats.batches;
    for (const Queued& q : batch)
      result.stats.words_scanned +=
          ScanWords(staging + q.at, q.bytes, q.address, q.range, index, &result.links);
    batch.clear();
    used = 0;
    return CUDA_SUCCESS;
  };
  for (const Segment& seg : plan) {
    std::uint64_t address = ranges[seg.range].base + seg.offset;
    std::uint64_t left = seg.bytes;
    while (left > 0 && result.error == CUDA_SUCCESS) {
      std::uint64_t len = std::min(left, cap - used);
      // A segment split across batches is cut at a word boundary so no word is lost.
      if (len < left) {
        const std::uint64_t end = AlignDown8(address + len);
        len = end > address ? end - address : 0;
      }
      if (len == 0) {
        result.error = flush();
        continue;
      }
      if (const CUresult r = source->Copy(staging + used, address, len); r != CUDA_SUCCESS) {
        result.error = r;
        break;
      }
      batch.push_back({seg.range, address, used, len});
      result.stats.bytes_copied += len;
      used = AlignUp8(used + len);
      address += len;
      left -= len;
    }
    if (result.error != CUDA_SUCCESS) break;
  }
  if (result.error == CUDA_SUCCESS) result.error = flush();
  MergeLinks(&result.links);
  for (const PointerLink& l : result.links) result.targets.push_back(ranges[l.target].base);
  std::sort(result.targets.begin(), result.targets.end());
  result.targets.erase(std::unique(result.targets.begin(), result.targets.end()),
                       result.targets.end());
  return result;
}

ScanResult ScanPointerTables(const DriverApi& api, std::span<const Range> ranges,
                             const ScanOptions& options) {
  const bool any = std::any_of(ranges.begin(), ranges.end(),
                               [](const Range& r) { return r.scan && r.bytes > 0; });
  if (!any || options.budget_bytes == 0) {
    ScanResult empty;
    empty.stats.ranges_unsampled = std::count_if(
        ranges.begin(), ranges.end(), [](const Range& r) { return r.scan && r.bytes > 0; });
    return empty;
  }
  ScanOptions o = options;
  o.staging_bytes = AlignUp8(std::max<std::uint64_t>(8, std::min(o.staging_bytes, o.budget_bytes)));
  CUevent done = nullptr;
  void* staging = nullptr;
  ScanResult result;
  if (CUresult r = api.event_create(&done, CU_EVENT_DISABLE_TIMING); r != CUDA_SUCCESS) {
    result.error = r;
    return result;
  }
  if (CUresult r = api.mem_host_alloc(&staging, o.staging_bytes, 0); r != CUDA_SUCCESS) {
    api.event_destroy(done);
    result.error = r;
    return result;
  }
  DriverSource source(api, o.stream, done);
  result = ScanSamples(ranges, o, &source, static_cast<unsigned char*>(staging));
  // After a failed copy, earlier copies of the batch may still be in flight into the staging
  // buffer: wait for the stream before freeing it (best effort: the error may be sticky).
  if (result.error != CUDA_SUCCESS) source.Wait();
  api.mem_free_host(staging);
  api.event_destroy(done);
  return result;
}

std::vector<CUdeviceptr> FindPointerTargets(const DriverApi& api, std::span<const Range> ranges,
                                            const ScanOptions& options) {
  return ScanPointerTables(api, ranges, options).targets;
}

std::vector<std::vector<std::uint8_t>> EncodePointerTargets(std::uint64_t scan,
                                                            std::span<const std::uint64_t> ids) {
  std::vector<std::uint64_t> kept;
  for (std::uint64_t id : ids)
    if (id != ipc::kNoAllocation) kept.push_back(id);
  std::vector<std::vector<std::uint8_t>> records;
  for (std::size_t at = 0; at < kept.size(); at += ipc::kMaxPointerTargetsPerRecord) {
    const std::size_t n = std::min(kept.size() - at, ipc::kMaxPointerTargetsPerRecord);
    const ipc::PointerTargetsRecord head{static_cast<std::uint32_t>(n), 0, scan};
    std::vector<std::uint8_t>& out = records.emplace_back(sizeof(head) + n * sizeof(std::uint64_t));
    std::memcpy(out.data(), &head, sizeof(head));
    std::memcpy(out.data() + sizeof(head), kept.data() + at, n * sizeof(std::uint64_t));
  }
  return records;
}

}  // namespace chameleon::shim::swap
