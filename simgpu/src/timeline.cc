#include "timeline.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace chameleon::simgpu {
namespace {

struct TimelineFile {
  std::mutex mu;
  std::FILE* file = nullptr;
  TimelineFile() {
    const char* path = std::getenv("SIMGPU_TIMELINE");
    if (path == nullptr || *path == '\0') return;
    file = std::fopen(path, "w");
    if (file == nullptr) {
      std::fprintf(stderr, "simgpu: SIMGPU_TIMELINE %s: cannot open; no timeline\n", path);
      return;
    }
    std::fputs("device,stream,kind,start_ns,end_ns,bytes\n", file);
  }
  // Lives until exit; the C library flushes the stream then.
};

TimelineFile& File() {
  static TimelineFile* timeline = new TimelineFile();  // never destroyed: streams outlive statics
  return *timeline;
}

const char* Name(TimelineKind kind) {
  switch (kind) {
    case TimelineKind::kKernel:
      return "kernel";
    case TimelineKind::kCopy:
      return "copy";
    case TimelineKind::kWait:
      return "wait";
  }
  return "?";
}

}  // namespace

bool TimelineEnabled() {
  static const bool enabled = File().file != nullptr;
  return enabled;
}

void TimelineRecord(int device, const void* stream, TimelineKind kind, std::uint64_t start_ns,
                    std::uint64_t end_ns, double bytes) {
  TimelineFile& t = File();
  std::lock_guard lock(t.mu);
  std::fprintf(t.file, "%d,%p,%s,%llu,%llu,%.0f\n", device, stream, Name(kind),
               static_cast<unsigned long long>(start_ns), static_cast<unsigned long long>(end_ns),
               bytes);
}

}  // namespace chameleon::simgpu
