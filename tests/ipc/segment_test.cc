// Segment creation and attachment (the happy paths; corruption_test.cc has the refusals).
#include "chameleon/ipc/segment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "test_util.h"

namespace chameleon::ipc {
namespace {

TEST(SegmentTest, ShouldAttachTheSameMemoryThroughADuplicatedDescriptor) {
  Segment client;
  ASSERT_EQ(Segment::Create(SegmentGeometry{}, &client), SegmentError::kOk);
  Segment daemon;
  ASSERT_EQ(Segment::Attach(dup(client.fd()), &daemon), SegmentError::kOk);
  EXPECT_NE(client.header(), daemon.header());  // two mappings ...
  client.header()->records_written.store(42);
  EXPECT_EQ(daemon.header()->records_written.load(), 42u);  // ... of one memory
  daemon.header()->control_flags.store(kControlDisabled);
  EXPECT_EQ(client.header()->control_flags.load(), kControlDisabled);
}

TEST(SegmentTest, ShouldDescribeDefaultGeometryInTheHeader) {
  Segment s;
  const SegmentGeometry g;
  ASSERT_EQ(Segment::Create(g, &s), SegmentError::kOk);
  const SegmentHeader& h = *s.header();
  EXPECT_EQ(h.magic, kSegmentMagic);
  EXPECT_EQ(h.layout_version.load(), PackVersion(kLayoutMajor, kLayoutMinor));
  EXPECT_EQ(h.header_bytes, sizeof(SegmentHeader));
  EXPECT_EQ(h.ring_capacity, 4u << 20);
  EXPECT_EQ(h.names_capacity, 256u << 10);
  EXPECT_EQ(h.mailbox_slot_bytes, kDefaultPolicySlotBytes);
  EXPECT_EQ(h.creator_pid, getpid());
  EXPECT_EQ(h.segment_bytes, SegmentBytes(g));
  EXPECT_EQ(s.bytes(), SegmentBytes(g));
  EXPECT_EQ(h.ring_offset % kFalseSharing, 0u);
  EXPECT_EQ(h.names_offset % kFalseSharing, 0u);
  EXPECT_EQ(h.mailbox_offset % kFalseSharing, 0u);
  EXPECT_GE(h.names_offset, h.ring_offset + sizeof(EventRingDescriptor) + h.ring_capacity);
  EXPECT_GE(h.mailbox_offset, h.names_offset + sizeof(NameTableDescriptor) + h.names_capacity);
  struct stat st {};
  ASSERT_EQ(fstat(s.fd(), &st), 0);
  EXPECT_EQ(static_cast<std::uint64_t>(st.st_size), SegmentBytes(g));
}

TEST(SegmentTest, ShouldBeSealedAgainstShrinking) {
  Segment s;
  ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &s), SegmentError::kOk);
  EXPECT_NE(fcntl(s.fd(), F_GET_SEALS) & F_SEAL_SHRINK, 0);
  EXPECT_NE(ftruncate(s.fd(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
}

TEST(SegmentTest, ShouldRefuseGeometriesOutsideTheLimits) {
  Segment s;
  EXPECT_EQ(Segment::Create({3000, 4096, 4096}, &s), SegmentError::kBadGeometry);
  EXPECT_EQ(Segment::Create({2048, 4096, 4096}, &s), SegmentError::kBadGeometry);
  EXPECT_EQ(Segment::Create({kMaxRingCapacity * 2, 4096, 4096}, &s), SegmentError::kBadGeometry);
  EXPECT_EQ(Segment::Create({4096, 4095, 4096}, &s), SegmentError::kBadGeometry);
  EXPECT_EQ(Segment::Create({4096, 4096, 4096 + 8}, &s), SegmentError::kBadGeometry);
  EXPECT_EQ(Segment::Create({4096, 4096, 1024}, &s), SegmentError::kBadGeometry);
  EXPECT_FALSE(s.valid());
  EXPECT_EQ(Segment::Create({4096, 0, 4096}, &s), SegmentError::kOk);  // no names is allowed
}

TEST(SegmentTest, ShouldKeepMappingAfterClosingDescriptorAndMove) {
  Segment a;
  ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &a), SegmentError::kOk);
  a.CloseFd();
  EXPECT_EQ(a.fd(), -1);
  a.header()->stall_count.store(3);
  Segment b(std::move(a));
  EXPECT_FALSE(a.valid());
  ASSERT_TRUE(b.valid());
  EXPECT_EQ(b.header()->stall_count.load(), 3u);
  Segment c;
  c = std::move(b);
  EXPECT_EQ(c.header()->stall_count.load(), 3u);
}

TEST(SegmentTest, ShouldGiveEndsThatTalkThroughTheSegment) {
  Segment client;
  ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &client), SegmentError::kOk);
  Segment daemon;
  ASSERT_EQ(Segment::Attach(dup(client.fd()), &daemon), SegmentError::kOk);
  EventRingProducer producer = client.ring_producer();
  EventRingConsumer consumer = daemon.ring_consumer();
  ASSERT_EQ(testing::PushLaunch(&producer, 5), PushResult::kOk);
  std::uint64_t seq = 0;
  EXPECT_EQ(consumer.Drain([&](const RecordView& v) { seq = testing::LaunchSeq(v); }, 4, 0, 1), 1u);
  EXPECT_EQ(seq, 5u);
  NameTableWriter names = client.name_writer();
  ASSERT_TRUE(names.Append(16, "gemm"));
  NameTableReader reader = daemon.name_reader();
  std::string got;
  EXPECT_TRUE(reader.ReadNew([&](std::uint32_t, std::string_view n) { got = n; }));
  EXPECT_EQ(got, "gemm");
  PolicyMailboxWriter mailbox = daemon.mailbox_writer();
  const std::uint8_t blob[3] = {1, 2, 3};
  ASSERT_EQ(mailbox.Publish(blob), PublishResult::kOk);
  PolicyMailboxReader mreader = client.mailbox_reader();
  ASSERT_EQ(mreader.Poll(), ReadResult::kNew);
  EXPECT_EQ(mreader.blob().size(), 3u);
  EXPECT_GT(MonotonicNowNs(), 0u);
  EXPECT_STRNE(ToString(SegmentError::kBadRegion), ToString(SegmentError::kNotSealed));
}

}  // namespace
}  // namespace chameleon::ipc
