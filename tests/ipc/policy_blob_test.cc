// Policy blob: round trip, forward compatibility, and every BlobError.
#include "chameleon/ipc/policy_blob.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include <cstring>
#include <random>

namespace chameleon::ipc {
namespace {

Policy SamplePolicy() {
  Policy p;
  p.summary.generation = 7;
  p.summary.stage = static_cast<std::uint32_t>(Stage::kStable);
  p.summary.device_limit_bytes = 1ull << 34;
  p.summary.predicted_iteration_s = 0.25;
  p.summary.lent_bytes = 5ull << 30;
  p.summary.predicted_in_wait_s = 0.125;
  p.boundary = {16, 17, 18};
  for (std::uint32_t i = 0; i < 5; ++i) {
    SwapEntry e{};
    e.match_key = 1000 + i;
    e.bytes = (i + 1) << 20;
    e.out_token = 20 + i;
    e.in_occurrence = i;
    e.tier = static_cast<std::uint16_t>(Tier::kPeerGpu);
    p.entries.push_back(e);
  }
  p.excluded = {99, 100};
  p.leases = {LeaseGrant{41, 3ull << 30, 1, 0, 0}, LeaseGrant{42, 1ull << 20, 3, 0, 0}};
  return p;
}

std::vector<std::uint8_t> Encode(const Policy& p) {
  std::vector<std::uint8_t> out;
  EncodePolicy(p, &out);
  return out;
}

PolicyBlobHeader HeaderOf(const std::vector<std::uint8_t>& blob) {
  PolicyBlobHeader h;
  std::memcpy(&h, blob.data(), sizeof(h));
  return h;
}

// Rewrites the header (and the checksum, so a deliberate payload edit reaches the section check).
void Patch(std::vector<std::uint8_t>* blob, const PolicyBlobHeader& h, bool fix_crc) {
  PolicyBlobHeader copy = h;
  if (fix_crc) {
    copy.crc32 = static_cast<std::uint32_t>(
        crc32_z(0, blob->data() + h.header_bytes, blob->size() - h.header_bytes));
  }
  std::memcpy(blob->data(), &copy, sizeof(copy));
}

bool SameEntries(const std::vector<SwapEntry>& a, const std::vector<SwapEntry>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(SwapEntry)) == 0;
}

TEST(PolicyBlobTest, ShouldRoundTripEverySection) {
  const Policy p = SamplePolicy();
  const auto blob = Encode(p);
  EXPECT_EQ(blob.size() % 8, 0u);
  Policy q;
  ASSERT_EQ(DecodePolicy(blob, &q), BlobError::kOk);
  EXPECT_EQ(q.summary.generation, 7u);
  EXPECT_EQ(q.summary.stage, static_cast<std::uint32_t>(Stage::kStable));
  EXPECT_EQ(q.summary.predicted_iteration_s, 0.25);
  EXPECT_EQ(q.summary.predicted_in_wait_s, 0.125);
  EXPECT_EQ(q.boundary, p.boundary);
  EXPECT_TRUE(SameEntries(q.entries, p.entries));
  EXPECT_EQ(q.excluded, p.excluded);
  ASSERT_EQ(q.leases.size(), 2u);
  EXPECT_EQ(q.leases[1].lease_id, 42u);
  EXPECT_EQ(q.leases[0].bytes, 3ull << 30);
  EXPECT_EQ(q.leases[1].helper, 3u);
  EXPECT_EQ(q.summary.lent_bytes, 5ull << 30);
}

TEST(PolicyBlobTest, ShouldAppendAfterExistingBytes) {
  std::vector<std::uint8_t> out = {1, 2, 3};
  EncodePolicy(SamplePolicy(), &out);
  Policy q;
  EXPECT_EQ(DecodePolicy(std::span(out).subspan(3), &q), BlobError::kOk);
}

TEST(PolicyBlobTest, ShouldSkipUnknownSectionsFromANewerMinor) {
  auto blob = Encode(SamplePolicy());
  const PolicySectionHeader extra{77, 0, 5};
  const std::uint8_t data[8] = {1, 2, 3, 4, 5, 0, 0, 0};
  blob.insert(blob.end(), reinterpret_cast<const std::uint8_t*>(&extra),
              reinterpret_cast<const std::uint8_t*>(&extra) + sizeof(extra));
  blob.insert(blob.end(), data, data + 8);
  PolicyBlobHeader h = HeaderOf(blob);
  h.section_count += 1;
  h.payload_bytes += sizeof(extra) + 8;
  h.minor = kPolicyBlobMinor + 1;
  Patch(&blob, h, true);
  Policy q;
  ASSERT_EQ(DecodePolicy(blob, &q), BlobError::kOk);
  EXPECT_EQ(q.boundary, SamplePolicy().boundary);
}

TEST(PolicyBlobTest, ShouldReportTruncated) {
  const auto blob = Encode(SamplePolicy());
  Policy q;
  for (std::size_t n = 0; n < blob.size(); ++n) {
    const BlobError e = DecodePolicy(std::span(blob).first(n), &q);
    EXPECT_NE(e, BlobError::kOk) << n;
    if (n < sizeof(PolicyBlobHeader)) {
      EXPECT_EQ(e, BlobError::kTruncated);
    }
  }
  EXPECT_EQ(DecodePolicy(std::span(blob).first(blob.size() - 8), &q), BlobError::kTruncated);
  // A section that claims more bytes than the payload holds (checksum fixed up).
  auto bad = blob;
  PolicySectionHeader s;
  std::memcpy(&s, bad.data() + sizeof(PolicyBlobHeader), sizeof(s));
  s.bytes = 1u << 20;
  std::memcpy(bad.data() + sizeof(PolicyBlobHeader), &s, sizeof(s));
  Patch(&bad, HeaderOf(bad), true);
  EXPECT_EQ(DecodePolicy(bad, &q), BlobError::kTruncated);
  // More sections announced than present.
  bad = blob;
  PolicyBlobHeader h = HeaderOf(bad);
  h.section_count += 1;
  Patch(&bad, h, false);
  EXPECT_EQ(DecodePolicy(bad, &q), BlobError::kTruncated);
}

TEST(PolicyBlobTest, ShouldReportBadMagicMajorHeaderBytesAndChecksum) {
  const auto blob = Encode(SamplePolicy());
  Policy q;
  auto bad = blob;
  PolicyBlobHeader h = HeaderOf(blob);
  h.magic ^= 1;
  Patch(&bad, h, false);
  EXPECT_EQ(DecodePolicy(bad, &q), BlobError::kBadMagic);
  h = HeaderOf(blob);
  h.major = kPolicyBlobMajor + 1;
  Patch(&bad, h, false);
  EXPECT_EQ(DecodePolicy(bad, &q), BlobError::kMajorMismatch);
  for (std::uint32_t hb : {0u, 24u, 33u, 1u << 30}) {
    h = HeaderOf(blob);
    h.header_bytes = hb;
    Patch(&bad, h, false);
    EXPECT_EQ(DecodePolicy(bad, &q), BlobError::kBadHeaderBytes) << hb;
  }
  bad = blob;
  bad[bad.size() - 1] ^= 0x40;
  EXPECT_EQ(DecodePolicy(bad, &q), BlobError::kBadChecksum);
  EXPECT_EQ(q.boundary.size(), 0u);  // failures leave the output untouched
}

TEST(PolicyBlobTest, ShouldReportBadSectionAndMissingSummary) {
  Policy q;
  // A boundary section whose size is not a whole number of tokens.
  auto blob = Encode(SamplePolicy());
  const std::size_t boundary_at =
      sizeof(PolicyBlobHeader) + sizeof(PolicySectionHeader) + sizeof(PolicySummary);
  PolicySectionHeader s;
  std::memcpy(&s, blob.data() + boundary_at, sizeof(s));
  ASSERT_EQ(s.type, static_cast<std::uint32_t>(PolicySection::kBoundary));
  s.bytes = 11;
  std::memcpy(blob.data() + boundary_at, &s, sizeof(s));
  Patch(&blob, HeaderOf(blob), true);
  EXPECT_EQ(DecodePolicy(blob, &q), BlobError::kBadSection);
  // Bytes after the last section.
  blob = Encode(SamplePolicy());
  blob.resize(blob.size() + 8, 0);
  PolicyBlobHeader h = HeaderOf(blob);
  h.payload_bytes += 8;
  Patch(&blob, h, true);
  EXPECT_EQ(DecodePolicy(blob, &q), BlobError::kBadSection);
  // No summary: drop the first section.
  blob = Encode(SamplePolicy());
  blob.erase(blob.begin() + sizeof(PolicyBlobHeader), blob.begin() + sizeof(PolicyBlobHeader) +
                                                          sizeof(PolicySectionHeader) +
                                                          sizeof(PolicySummary));
  h = HeaderOf(blob);
  h.section_count -= 1;
  h.payload_bytes -= sizeof(PolicySectionHeader) + sizeof(PolicySummary);
  Patch(&blob, h, true);
  EXPECT_EQ(DecodePolicy(blob, &q), BlobError::kMissingSummary);
  EXPECT_STRNE(ToString(BlobError::kMissingSummary), ToString(BlobError::kBadSection));
}

TEST(PolicyBlobTest, ShouldNeverAcceptRandomBytes) {
  std::mt19937_64 rng(1);
  Policy q;
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 2000; ++i) {
    bytes.resize(rng() % 512);
    for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
    if (bytes.size() >= 8 && i % 2 == 0) {  // half with a valid magic and major, to go deeper
      const std::uint32_t magic = kPolicyBlobMagic;
      const std::uint16_t major = kPolicyBlobMajor;
      std::memcpy(bytes.data(), &magic, 4);
      std::memcpy(bytes.data() + 4, &major, 2);
    }
    EXPECT_NE(DecodePolicy(bytes, &q), BlobError::kOk);
  }
}

}  // namespace
}  // namespace chameleon::ipc

namespace chameleon::ipc {
namespace {

// A blob whose summary is the first `summary_bytes` of `summary`, as an older writer sent it.
std::vector<std::uint8_t> OlderSummaryBlob(const PolicySummary& summary, std::size_t summary_bytes,
                                           std::uint16_t minor) {
  std::vector<std::uint8_t> payload(sizeof(PolicySectionHeader) + summary_bytes);
  const PolicySectionHeader section{static_cast<std::uint32_t>(PolicySection::kSummary), 0,
                                    summary_bytes};
  std::memcpy(payload.data(), &section, sizeof(section));
  std::memcpy(payload.data() + sizeof(section), &summary, summary_bytes);
  PolicyBlobHeader h{};
  h.magic = kPolicyBlobMagic;
  h.major = kPolicyBlobMajor;
  h.minor = minor;
  h.header_bytes = sizeof(PolicyBlobHeader);
  h.section_count = 1;
  h.payload_bytes = payload.size();
  h.crc32 = static_cast<std::uint32_t>(crc32_z(0, payload.data(), payload.size()));
  std::vector<std::uint8_t> blob(sizeof(h) + payload.size());
  std::memcpy(blob.data(), &h, sizeof(h));
  std::memcpy(blob.data() + sizeof(h), payload.data(), payload.size());
  return blob;
}

// A 1.1 writer's summary is 56 bytes, a 1.2 writer's 64: both decode, the later fields zero.
TEST(PolicyBlobTest, ShouldDecodeTheShorterSummariesOfOlderMinors) {
  PolicySummary old{};
  old.generation = 9;
  old.lent_bytes = 77;             // not written by 1.1
  old.predicted_in_wait_s = 0.25;  // not written by 1.1 or 1.2
  Policy q;
  ASSERT_EQ(DecodePolicy(OlderSummaryBlob(old, kPolicySummaryMinBytes, 1), &q), BlobError::kOk);
  EXPECT_EQ(q.summary.generation, 9u);
  EXPECT_EQ(q.summary.lent_bytes, 0u);
  EXPECT_EQ(q.summary.predicted_in_wait_s, 0.0);
  ASSERT_EQ(DecodePolicy(OlderSummaryBlob(old, 64, 2), &q), BlobError::kOk);
  EXPECT_EQ(q.summary.lent_bytes, 77u);
  EXPECT_EQ(q.summary.predicted_in_wait_s, 0.0);
  ASSERT_EQ(DecodePolicy(OlderSummaryBlob(old, sizeof(PolicySummary), 3), &q), BlobError::kOk);
  EXPECT_EQ(q.summary.predicted_in_wait_s, 0.25);
}

}  // namespace
}  // namespace chameleon::ipc
