// Policy blob encoding and validation. See policy_blob.h.
#include "chameleon/ipc/policy_blob.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "byte_io.h"

namespace chameleon::ipc {
namespace {

using detail::Append;
using detail::AppendBytes;
using detail::LoadAt;

constexpr std::uint64_t Pad8(std::uint64_t n) { return (n + 7) & ~std::uint64_t{7}; }

std::uint32_t Crc32(std::span<const std::uint8_t> bytes) {
  return static_cast<std::uint32_t>(crc32_z(crc32_z(0, nullptr, 0), bytes.data(), bytes.size()));
}

void AppendSection(PolicySection type, const void* data, std::size_t bytes,
                   std::vector<std::uint8_t>* out, std::uint32_t* count) {
  Append(out, PolicySectionHeader{static_cast<std::uint32_t>(type), 0, bytes});
  AppendBytes(out, data, bytes);
  out->resize(out->size() + (Pad8(bytes) - bytes), 0);
  ++*count;
}

template <typename T>
void CopyArray(std::span<const std::uint8_t> data, std::vector<T>* out) {
  out->resize(data.size() / sizeof(T));
  if (!out->empty()) std::memcpy(out->data(), data.data(), out->size() * sizeof(T));
}

// Decodes one known section into `policy`; unknown types are ignored (a newer minor added them).
BlobError DecodeSection(std::uint32_t type, std::span<const std::uint8_t> data, Policy* policy,
                        bool* have_summary) {
  switch (static_cast<PolicySection>(type)) {
    case PolicySection::kSummary:
      // A newer minor may append summary fields; fewer than we know is malformed.
      if (data.size() < kPolicySummaryMinBytes || *have_summary) return BlobError::kBadSection;
      policy->summary = PolicySummary{};  // an older writer's summary ends before the new fields
      std::memcpy(&policy->summary, data.data(), std::min(data.size(), sizeof(PolicySummary)));
      *have_summary = true;
      return BlobError::kOk;
    case PolicySection::kBoundary:
      if (data.size() % sizeof(std::uint32_t) != 0) return BlobError::kBadSection;
      CopyArray(data, &policy->boundary);
      return BlobError::kOk;
    case PolicySection::kSwapEntries:
      if (data.size() % sizeof(SwapEntry) != 0) return BlobError::kBadSection;
      CopyArray(data, &policy->entries);
      return BlobError::kOk;
    case PolicySection::kExcluded:
      if (data.size() % sizeof(std::uint64_t) != 0) return BlobError::kBadSection;
      CopyArray(data, &policy->excluded);
      return BlobError::kOk;
    case PolicySection::kLeases:
      if (data.size() % sizeof(LeaseGrant) != 0) return BlobError::kBadSection;
      CopyArray(data, &policy->leases);
      return BlobError::kOk;
  }
  return BlobError::kOk;
}

BlobError DecodeSections(std::span<const std::uint8_t> payload, std::uint32_t count,
                         Policy* policy) {
  bool have_summary = false;
  std::size_t offset = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (payload.size() - offset < sizeof(PolicySectionHeader)) return BlobError::kTruncated;
    const auto section = LoadAt<PolicySectionHeader>(payload, offset);
    offset += sizeof(PolicySectionHeader);
    if (section.bytes > payload.size() - offset || Pad8(section.bytes) > payload.size() - offset) {
      return BlobError::kTruncated;
    }
    const BlobError error =
        DecodeSection(section.type, payload.subspan(offset, section.bytes), policy, &have_summary);
    if (error != BlobError::kOk) return error;
    offset += Pad8(section.bytes);
  }
  // Bytes the section count does not account for are not ours to ignore.
  if (offset != payload.size()) return BlobError::kBadSection;
  return have_summary ? BlobError::kOk : BlobError::kMissingSummary;
}

}  // namespace

const char* ToString(BlobError error) {
  switch (error) {
    case BlobError::kOk:
      return "ok";
    case BlobError::kTruncated:
      return "policy blob truncated";
    case BlobError::kBadMagic:
      return "bad policy blob magic";
    case BlobError::kMajorMismatch:
      return "policy blob major version mismatch";
    case BlobError::kBadHeaderBytes:
      return "bad policy blob header size";
    case BlobError::kBadChecksum:
      return "policy blob checksum mismatch";
    case BlobError::kBadSection:
      return "malformed policy section";
    case BlobError::kMissingSummary:
      return "policy blob has no summary section";
  }
  return "unknown blob error";
}

void EncodePolicy(const Policy& policy, std::vector<std::uint8_t>* out) {
  const std::size_t start = out->size();
  out->resize(start + sizeof(PolicyBlobHeader), 0);
  std::uint32_t count = 0;
  AppendSection(PolicySection::kSummary, &policy.summary, sizeof(policy.summary), out, &count);
  if (!policy.boundary.empty()) {
    AppendSection(PolicySection::kBoundary, policy.boundary.data(),
                  policy.boundary.size() * sizeof(std::uint32_t), out, &count);
  }
  if (!policy.entries.empty()) {
    AppendSection(PolicySection::kSwapEntries, policy.entries.data(),
                  policy.entries.size() * sizeof(SwapEntry), out, &count);
  }
  if (!policy.excluded.empty()) {
    AppendSection(PolicySection::kExcluded, policy.excluded.data(),
                  policy.excluded.size() * sizeof(std::uint64_t), out, &count);
  }
  if (!policy.leases.empty()) {
    AppendSection(PolicySection::kLeases, policy.leases.data(),
                  policy.leases.size() * sizeof(LeaseGrant), out, &count);
  }
  PolicyBlobHeader header{};
  header.magic = kPolicyBlobMagic;
  header.major = kPolicyBlobMajor;
  header.minor = kPolicyBlobMinor;
  header.header_bytes = sizeof(PolicyBlobHeader);
  header.section_count = count;
  header.payload_bytes = out->size() - start - sizeof(PolicyBlobHeader);
  const std::span<const std::uint8_t> payload(out->data() + start + sizeof(header),
                                              header.payload_bytes);
  header.crc32 = Crc32(payload);
  detail::StoreAt(out, start, header);
}

BlobError DecodePolicy(std::span<const std::uint8_t> blob, Policy* policy) {
  if (blob.size() < sizeof(PolicyBlobHeader)) return BlobError::kTruncated;
  const auto header = LoadAt<PolicyBlobHeader>(blob, 0);
  if (header.magic != kPolicyBlobMagic) return BlobError::kBadMagic;
  if (header.major != kPolicyBlobMajor) return BlobError::kMajorMismatch;
  // A newer minor may grow the header (it only appends); it stays 8-byte aligned.
  if (header.header_bytes < sizeof(PolicyBlobHeader) || header.header_bytes % 8 != 0 ||
      header.header_bytes > blob.size()) {
    return BlobError::kBadHeaderBytes;
  }
  if (header.payload_bytes > blob.size() - header.header_bytes) return BlobError::kTruncated;
  const auto payload = blob.subspan(header.header_bytes, header.payload_bytes);
  if (Crc32(payload) != header.crc32) return BlobError::kBadChecksum;
  Policy decoded;
  const BlobError error = DecodeSections(payload, header.section_count, &decoded);
  if (error == BlobError::kOk) *policy = std::move(decoded);
  return error;
}

}  // namespace chameleon::ipc
