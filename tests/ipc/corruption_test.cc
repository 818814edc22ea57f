// What a hostile or broken peer can write into a segment: every SegmentError of Attach, random
// bytes in each region, and targeted ring/name corruption. After each, a valid segment is still
// accepted (nothing sticky, nothing crashed).
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

#include "chameleon/ipc/policy_blob.h"
#include "test_util.h"

namespace chameleon::ipc {
namespace {

class CorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(Segment::Create(testing::SmallGeometry(), &segment_), SegmentError::kOk);
    base_ = reinterpret_cast<std::uint8_t*>(segment_.header());
    std::memcpy(good_header_, base_, sizeof(good_header_));
  }
  // Applies `edit` to the header, attaches a duplicate descriptor, restores the header.
  SegmentError AttachWith(const std::function<void(SegmentHeader*)>& edit) {
    edit(segment_.header());
    Segment daemon;
    const SegmentError e = Segment::Attach(dup(segment_.fd()), &daemon);
    std::memcpy(base_, good_header_, sizeof(good_header_));
    return e;
  }
  SegmentError AttachValid() {
    Segment daemon;
    return Segment::Attach(dup(segment_.fd()), &daemon);
  }
  std::uint8_t* Region(std::uint64_t offset) { return base_ + offset; }
  Segment segment_;
  std::uint8_t* base_ = nullptr;
  std::uint8_t good_header_[sizeof(SegmentHeader)];
};

TEST_F(CorruptionTest, ShouldReportEveryAttachErrorThenAcceptAValidSegment) {
  using H = SegmentHeader;
  EXPECT_EQ(AttachWith([](H* h) { h->layout_version.store(0); }), SegmentError::kNotReady);
  EXPECT_EQ(AttachWith([](H* h) { h->magic = 0; }), SegmentError::kBadMagic);
  EXPECT_EQ(AttachWith([](H* h) { h->layout_version.store(PackVersion(kLayoutMajor + 1, 0)); }),
            SegmentError::kMajorMismatch);
  EXPECT_EQ(AttachWith([](H* h) { h->header_bytes = 512; }), SegmentError::kBadHeaderBytes);
  EXPECT_EQ(AttachWith([](H* h) { h->header_bytes = 1030; }), SegmentError::kBadHeaderBytes);
  EXPECT_EQ(AttachWith([](H* h) { h->header_bytes = 1u << 30; }), SegmentError::kBadHeaderBytes);
  EXPECT_EQ(AttachWith([](H* h) { h->segment_bytes += 4096; }), SegmentError::kSizeMismatch);
  EXPECT_EQ(AttachWith([](H* h) { h->ring_capacity = 6000; }), SegmentError::kBadGeometry);
  EXPECT_EQ(AttachWith([](H* h) { h->mailbox_slot_bytes = 1ull << 40; }),
            SegmentError::kBadGeometry);
  EXPECT_EQ(AttachWith([](H* h) { h->ring_offset += 8; }), SegmentError::kBadRegion);
  EXPECT_EQ(AttachWith([](H* h) { h->ring_offset = 0; }), SegmentError::kBadRegion);
  EXPECT_EQ(AttachWith([](H* h) { h->names_offset = h->ring_offset; }), SegmentError::kBadRegion);
  EXPECT_EQ(AttachWith([](H* h) { h->mailbox_offset = h->segment_bytes; }),
            SegmentError::kBadRegion);
  EXPECT_EQ(AttachWith([](H* h) { h->mailbox_offset = ~0ull & ~127ull; }),
            SegmentError::kBadRegion);
  EXPECT_EQ(AttachWith([](H* h) { h->ring_capacity = 8192; }), SegmentError::kBadRegion);
  EXPECT_EQ(AttachValid(), SegmentError::kOk);
}

TEST_F(CorruptionTest, ShouldRefuseDescriptorsThatAreNotSealedSegments) {
  Segment out;
  EXPECT_EQ(Segment::Attach(-1, &out), SegmentError::kSystem);
  const int unsealed = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 1 << 20), 0);
  EXPECT_EQ(Segment::Attach(unsealed, &out), SegmentError::kNotSealed);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[1]);
  EXPECT_EQ(Segment::Attach(fds[0], &out), SegmentError::kNotSealed);
  const int tiny = memfd_create("tiny", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(tiny, 512), 0);
  ASSERT_EQ(fcntl(tiny, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(Segment::Attach(tiny, &out), SegmentError::kTooSmall);
  EXPECT_EQ(fcntl(tiny, F_GETFD), -1);  // Attach took ownership and closed it
  EXPECT_FALSE(out.valid());
  EXPECT_EQ(AttachValid(), SegmentError::kOk);
}

TEST_F(CorruptionTest, ShouldNeverAcceptRandomHeaders) {
  std::mt19937_64 rng(3);
  for (int i = 0; i < 300; ++i) {
    const SegmentError e = AttachWith([&](SegmentHeader*) {
      for (std::size_t b = 0; b < sizeof(SegmentHeader); ++b) base_[b] = rng();
    });
    EXPECT_NE(e, SegmentError::kOk);
  }
  // Random geometry behind a valid identity goes deeper but is still refused.
  for (int i = 0; i < 300; ++i) {
    const SegmentError e = AttachWith([&](SegmentHeader* h) {
      for (std::size_t b = 16; b < 88; ++b) base_[b] = rng();
      if (i % 2 == 0) h->segment_bytes = segment_.bytes();
    });
    EXPECT_NE(e, SegmentError::kOk);
  }
  EXPECT_EQ(AttachValid(), SegmentError::kOk);
}

TEST_F(CorruptionTest, ShouldOnlyHandOutValidatedRecordsFromRandomRingBytes) {
  const std::uint64_t ring = segment_.header()->ring_offset;
  std::uint8_t* data = Region(ring + sizeof(EventRingDescriptor));
  std::mt19937_64 rng(4);
  std::uint64_t errors = 0;
  for (int i = 0; i < 300; ++i) {
    for (std::size_t b = 0; b < 4096; ++b) data[b] = rng();
    // Every 8-byte-aligned length field plausible half the time, to reach the type checks.
    if (i % 2 == 0) {
      for (std::size_t b = 0; b < 4096; b += 8) {
        const std::int32_t len = 8 + static_cast<std::int32_t>(rng() % 64);
        const std::uint16_t type = static_cast<std::uint16_t>(rng() % 10);
        std::memcpy(data + b, &len, 4);
        std::memcpy(data + b + 4, &type, 2);
      }
    }
    EventRingConsumer consumer = segment_.ring_consumer();
    consumer.Drain(
        [&](const RecordView& v) {
          EXPECT_EQ(ValidateRecord(v.type, v.payload), DrainError::kNone);
        },
        1u << 20, 0, 0);
    errors += consumer.corrupt();
    std::memset(Region(ring), 0, sizeof(EventRingDescriptor) + 4096);
  }
  EXPECT_GT(errors, 0u);
  // The zeroed ring works again.
  EventRingProducer producer = segment_.ring_producer();
  EventRingConsumer consumer = segment_.ring_consumer();
  ASSERT_EQ(testing::PushLaunch(&producer, 1), PushResult::kOk);
  EXPECT_EQ(consumer.Drain([](const RecordView&) {}, 10, 0, 1), 1u);
  EXPECT_EQ(consumer.last_error(), DrainError::kNone);
}

class RingCorruptionTest : public CorruptionTest {
 protected:
  RecordHeader* At(std::uint64_t index) {
    return reinterpret_cast<RecordHeader*>(
        Region(segment_.header()->ring_offset + sizeof(EventRingDescriptor) + index));
  }
  // Drains twice: a corrupt record stops the drain and stays put (the daemon disconnects).
  DrainError DrainError2(std::size_t* handed_out) {
    EventRingConsumer consumer = segment_.ring_consumer();
    *handed_out = consumer.Drain([](const RecordView&) {}, 100, 0, 1000);
    const DrainError first = consumer.last_error();
    consumer.Drain([](const RecordView&) {}, 100, 0, 1000);
    EXPECT_EQ(consumer.last_error(), first);
    EXPECT_EQ(consumer.corrupt(), first == DrainError::kNone ? 0u : 2u);
    return first;
  }
};

TEST_F(RingCorruptionTest, ShouldStopAndCountOnEveryKindOfBadRecord) {
  const std::uint64_t second = testing::kLaunchRecordBytes;
  // A fresh ring holding two good launch records.
  auto two_records = [&] {
    std::memset(Region(segment_.header()->ring_offset), 0, sizeof(EventRingDescriptor) + 4096);
    EventRingProducer producer = segment_.ring_producer();
    ASSERT_EQ(testing::PushLaunch(&producer, 1), PushResult::kOk);
    ASSERT_EQ(testing::PushLaunch(&producer, 2), PushResult::kOk);
  };
  two_records();
  const std::int32_t good = At(second)->length.load();
  struct Case {
    std::int32_t length;
    std::uint16_t type;
    DrainError expect;
  };
  const Case cases[] = {
      {4, 1, DrainError::kBadLength},  // below a header
      {static_cast<std::int32_t>(kMaxRecordBytes) + 8, 1, DrainError::kBadLength},  // too long
      {4080, 1, DrainError::kBadLength},   // past the ring end
      {good, 42, DrainError::kNone},       // unknown type, sound length: skipped (a newer minor)
      {4, 42, DrainError::kBadLength},     // unknown type does not excuse a bad length
      {4080, 42, DrainError::kBadLength},  // nor one past the ring end
      {16, 1, DrainError::kBadPayload},    // launch too short
      {-5000, 1, DrainError::kNone},       // a claimed length is no error before the stuck timeout
  };
  std::size_t n = 0;
  for (const Case& c : cases) {
    two_records();
    At(second)->length.store(c.length);
    At(second)->type = c.type;
    EXPECT_EQ(DrainError2(&n), c.expect) << c.length << " " << c.type;
    EXPECT_EQ(n, 1u);  // the good record before it still came out
  }
  two_records();
  EXPECT_EQ(DrainError2(&n), DrainError::kNone);
  EXPECT_EQ(n, 2u);
}

TEST_F(RingCorruptionTest, ShouldSkipAndCountWellFramedRecordsOfUnknownTypes) {
  // A newer minor's record types between known ones: skipped whole, counted, and the records
  // after them still come out in order.
  EventRingProducer producer = segment_.ring_producer();
  const std::uint8_t future[40] = {1, 2, 3};
  ASSERT_EQ(testing::PushLaunch(&producer, 1), PushResult::kOk);
  ASSERT_EQ(producer.Push(static_cast<RecordType>(200), 0, future, sizeof(future)),
            PushResult::kOk);
  // The first number no layout knows yet (9 became kPointerTargets in layout 1.2, 10 kOpTimes
  // in 1.8).
  ASSERT_EQ(producer.Push(static_cast<RecordType>(11), 0, future, 3), PushResult::kOk);
  ASSERT_EQ(testing::PushLaunch(&producer, 2), PushResult::kOk);
  EventRingConsumer consumer = segment_.ring_consumer();
  std::vector<RecordType> types;
  EXPECT_EQ(consumer.Drain([&](const RecordView& r) { types.push_back(r.type); }, 100, 0, 1000),
            2u);
  EXPECT_EQ(types, (std::vector<RecordType>{RecordType::kLaunch, RecordType::kLaunch}));
  EXPECT_EQ(consumer.last_error(), DrainError::kNone);
  EXPECT_EQ(consumer.unknown_skipped(), 2u);
  EXPECT_EQ(consumer.corrupt(), 0u);
}

TEST_F(RingCorruptionTest, ShouldRefuseToSkipAStuckClaimWithImpossibleLength) {
  At(0)->length.store(-3);
  EventRingConsumer consumer = segment_.ring_consumer();
  consumer.Drain([](const RecordView&) {}, 10, 0, 10);
  consumer.Drain([](const RecordView&) {}, 10, 100, 10);
  EXPECT_EQ(consumer.last_error(), DrainError::kBadLength);
  EXPECT_EQ(consumer.repaired(), 0u);
}

TEST_F(RingCorruptionTest, ShouldNotLoopForeverOnARingFullOfPadding) {
  for (std::uint64_t i = 0; i < 4096; i += 64) At(i)->length.store(64);  // type 0 = padding
  EventRingConsumer consumer = segment_.ring_consumer();
  EXPECT_EQ(consumer.Drain([](const RecordView&) {}, 10, 0, 10), 0u);
  EXPECT_EQ(consumer.last_error(), DrainError::kNone);  // a lap of padding, then stop
}

TEST_F(CorruptionTest, ShouldRejectCorruptNameTables) {
  const std::uint64_t names = segment_.header()->names_offset;
  auto* descriptor = reinterpret_cast<NameTableDescriptor*>(Region(names));
  std::uint8_t* data = Region(names + sizeof(NameTableDescriptor));
  auto read = [&](NameTableReader* r) {
    return r->ReadNew([](std::uint32_t, std::string_view) {});
  };
  NameTableReader reader = segment_.name_reader();
  descriptor->committed_bytes.store(4096 + 8);  // beyond the capacity
  EXPECT_FALSE(read(&reader));
  const NameEntryHeader overrun{16, 100, 0};  // name runs past committed bytes
  std::memcpy(data, &overrun, sizeof(overrun));
  descriptor->committed_bytes.store(64);
  EXPECT_FALSE(read(&reader));
  const NameEntryHeader huge{16, kMaxNameBytes + 1, 0};
  std::memcpy(data, &huge, sizeof(huge));
  descriptor->committed_bytes.store(4096);
  EXPECT_FALSE(read(&reader));
  descriptor->committed_bytes.store(4);  // not even a whole entry header
  NameTableReader fresh = segment_.name_reader();
  EXPECT_FALSE(read(&fresh));
  std::mt19937_64 rng(5);
  for (int i = 0; i < 300; ++i) {
    for (std::size_t b = 0; b < 4096; ++b) data[b] = rng();
    descriptor->committed_bytes.store(rng() % 5000);
    NameTableReader r = segment_.name_reader();
    r.ReadNew([](std::uint32_t, std::string_view name) { EXPECT_LE(name.size(), kMaxNameBytes); });
  }
  std::memset(Region(names), 0, sizeof(NameTableDescriptor) + 4096);
  NameTableWriter writer = segment_.name_writer();
  ASSERT_TRUE(writer.Append(16, "ok"));
  NameTableReader again = segment_.name_reader();
  EXPECT_TRUE(read(&again));
}

TEST_F(CorruptionTest, ShouldNeverAcceptARandomMailboxAsAPolicy) {
  const std::uint64_t mailbox = segment_.header()->mailbox_offset;
  const std::size_t bytes = sizeof(PolicyMailboxDescriptor) + 2 * (sizeof(PolicySlotHeader) + 4096);
  std::mt19937_64 rng(6);
  for (int i = 0; i < 300; ++i) {
    std::uint8_t* p = Region(mailbox);
    for (std::size_t b = 0; b < bytes; ++b) p[b] = rng();
    auto* descriptor = reinterpret_cast<PolicyMailboxDescriptor*>(p);
    const std::uint64_t g = rng() % 4 + 1;
    descriptor->latest_generation.store(g);
    if (i % 2 == 0) {  // a consistent sequence so that the blob itself is what gets checked
      auto* slot = reinterpret_cast<PolicySlotHeader*>(p + sizeof(PolicyMailboxDescriptor) +
                                                       (g % 2) * (sizeof(PolicySlotHeader) + 4096));
      slot->seq.store(2 * g);
      slot->blob_bytes.store(rng() % 4200);
    }
    PolicyMailboxReader reader = segment_.mailbox_reader();
    if (reader.Poll() == ReadResult::kNew) {
      Policy policy;
      EXPECT_NE(DecodePolicy(reader.blob(), &policy), BlobError::kOk);
    }
  }
  std::memset(Region(mailbox), 0, bytes);
  PolicyMailboxWriter writer = segment_.mailbox_writer();
  std::vector<std::uint8_t> blob;
  EncodePolicy(Policy{}, &blob);
  ASSERT_EQ(writer.Publish(blob), PublishResult::kOk);
  PolicyMailboxReader reader = segment_.mailbox_reader();
  ASSERT_EQ(reader.Poll(), ReadResult::kNew);
  Policy policy;
  EXPECT_EQ(DecodePolicy(reader.blob(), &policy), BlobError::kOk);
}

}  // namespace
}  // namespace chameleon::ipc
