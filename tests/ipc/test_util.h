// Helpers shared by the ipc tests: small segments, launch records, fork/pipe plumbing.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/segment.h"

namespace chameleon::ipc::testing {

/// Record counts for the long loops; sanitizer builds run fewer.
#ifdef CHAMELEON_SANITIZER_BUILD
inline constexpr std::uint64_t kScale = 10;
#else
inline constexpr std::uint64_t kScale = 1;
#endif

/// The smallest geometry: 4 KiB ring, 4 KiB names, 4 KiB policy slots.
inline SegmentGeometry SmallGeometry() { return SegmentGeometry{4096, 4096, 4096}; }

/// A launch record with two tensor references; `seq` travels in the stream field.
struct Launch {
  LaunchRecord fixed;
  std::uint64_t tensors[2];
};
inline Launch MakeLaunch(std::uint64_t seq) {
  Launch l{};
  l.fixed.token = kFirstKernelToken + static_cast<std::uint32_t>(seq % 100);
  l.fixed.tensor_count = 2;
  l.fixed.device = 0;
  l.fixed.stream = seq;
  l.tensors[0] = seq * 2 + 1;
  l.tensors[1] = seq * 2 + 2;
  return l;
}
inline PushResult PushLaunch(EventRingProducer* producer, std::uint64_t seq) {
  const Launch l = MakeLaunch(seq);
  return producer->Push2(RecordType::kLaunch, 0, &l.fixed, sizeof(l.fixed), l.tensors,
                         sizeof(l.tensors));
}
/// Bytes one MakeLaunch record occupies in the ring.
inline constexpr std::size_t kLaunchRecordBytes =
    AlignRecord(sizeof(RecordHeader) + sizeof(Launch));

/// Decodes a launch view back into its sequence number, or ~0 if it is not MakeLaunch's output.
inline std::uint64_t LaunchSeq(const RecordView& view) {
  if (view.type != RecordType::kLaunch || view.payload.size() != sizeof(Launch)) return ~0ull;
  Launch l;
  std::memcpy(&l, view.payload.data(), sizeof(l));
  const Launch expect = MakeLaunch(l.fixed.stream);
  return std::memcmp(&l, &expect, sizeof(l)) == 0 ? l.fixed.stream : ~0ull;
}

/// Runs `body` in a forked child that exits with its return value (never returns in the child).
inline pid_t ForkChild(const std::function<int()>& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  return pid;
}

/// Waits for `pid`; returns the raw wait status.
inline int WaitStatus(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
  }
  return status;
}

/// One byte through a pipe: the cross-process "go" signal (no sleeps).
inline bool Signal(int fd) {
  const char c = 1;
  return write(fd, &c, 1) == 1;
}
inline bool AwaitSignal(int fd) {
  char c = 0;
  return read(fd, &c, 1) == 1;
}

}  // namespace chameleon::ipc::testing
