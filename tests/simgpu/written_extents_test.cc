// WrittenExtents: page residency as the record of written bytes, for private anonymous memory
// (pagemap) and memfds (SEEK_DATA), including after fork().
#include "written_extents.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

namespace chameleon::simgpu {
namespace {

const std::size_t kPage = WrittenExtents::PageSize();

char* MapAnonymous(std::size_t pages) {
  void* p = mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

std::uintptr_t U(const char* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(WrittenExtentsTest, ShouldReportExactlyTheWrittenPagesOfAnAnonymousMapping) {
  char* p = MapAnonymous(64);
  ASSERT_NE(p, nullptr);
  p[3 * kPage + 17] = 1;
  p[10 * kPage] = 2;
  p[11 * kPage + kPage - 1] = 3;
  std::vector<Extent> out;
  ASSERT_TRUE(WrittenExtents::ScanAnonymous(U(p), 64 * kPage, &out));
  ASSERT_EQ(out.size(), 2u);  // pages 10 and 11 touch: one extent
  EXPECT_EQ(out[0].begin, U(p) + 3 * kPage);
  EXPECT_EQ(out[0].end, U(p) + 4 * kPage);
  EXPECT_EQ(out[1].begin, U(p) + 10 * kPage);
  EXPECT_EQ(out[1].end, U(p) + 12 * kPage);
  munmap(p, 64 * kPage);
}

TEST(WrittenExtentsTest, ShouldClipExtentsToAnUnalignedRangeAndAppend) {
  char* p = MapAnonymous(8);
  ASSERT_NE(p, nullptr);
  std::memset(p + kPage, 7, 3 * kPage);  // pages 1..3
  std::vector<Extent> out = {Extent{1, 2}};
  ASSERT_TRUE(WrittenExtents::ScanAnonymous(U(p) + kPage + 100, 2 * kPage, &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].begin, U(p) + kPage + 100);
  EXPECT_EQ(out[1].end, U(p) + 3 * kPage + 100);
  munmap(p, 8 * kPage);
}

TEST(WrittenExtentsTest, ShouldSeeADroppedPageAsAHoleAgain) {
  char* p = MapAnonymous(4);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 4 * kPage);
  ASSERT_EQ(madvise(p + kPage, 2 * kPage, MADV_DONTNEED), 0);
  std::vector<Extent> out;
  ASSERT_TRUE(WrittenExtents::ScanAnonymous(U(p), 4 * kPage, &out));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].end, U(p) + kPage);
  EXPECT_EQ(out[1].begin, U(p) + 3 * kPage);
  munmap(p, 4 * kPage);
}

TEST(WrittenExtentsTest, ShouldFindMemfdDataWhereverTheFileIsMapped) {
  const int fd = memfd_create("written_extents_test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, static_cast<off_t>(32 * kPage)), 0);
  const char byte = 9;
  ASSERT_EQ(pwrite(fd, &byte, 1, static_cast<off_t>(20 * kPage + 5)), 1);  // through no mapping
  std::vector<Extent> out;
  // The scan covers file pages 16..31, as if they were mapped at address 0x100000.
  ASSERT_TRUE(WrittenExtents::ScanMemfd(fd, 16 * kPage, 0x100000, 16 * kPage, &out));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].begin, 0x100000 + 4 * kPage);
  EXPECT_EQ(out[0].end, 0x100000 + 5 * kPage);
  out.clear();
  ASSERT_TRUE(WrittenExtents::ScanMemfd(fd, 0, 0x100000, 16 * kPage, &out));
  EXPECT_TRUE(out.empty());
  close(fd);
}

TEST(WrittenExtentsTest, ShouldReadTheChildsOwnPagesAfterFork) {
  char* p = MapAnonymous(4);
  ASSERT_NE(p, nullptr);
  std::vector<Extent> out;
  ASSERT_TRUE(WrittenExtents::ScanAnonymous(U(p), 4 * kPage, &out));  // caches the descriptor
  ASSERT_TRUE(out.empty());
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    p[2 * kPage] = 1;  // only in the child: the parent's page tables do not have it
    std::vector<Extent> mine;
    const bool ok = WrittenExtents::ScanAnonymous(U(p), 4 * kPage, &mine);
    _exit(ok && mine.size() == 1 && mine[0].begin == U(p) + 2 * kPage ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  munmap(p, 4 * kPage);
}

}  // namespace
}  // namespace chameleon::simgpu
