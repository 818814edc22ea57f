#include "executor_stats.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>

namespace chameleon::shim {
namespace {

using ipc::CounterKind;
using ipc::kExecutorCounters;

constexpr std::size_t kIterationsIndex = ipc::ExecutorCounterIndex("iterations");
static_assert(kIterationsIndex < ipc::kExecutorCounterCount);

// One record: ~35 counters, each twice, under 48 characters a pair, plus the envelope.
constexpr std::size_t kRecordBytes = 8192;

/// Appends printf output to a fixed buffer; a record that would not fit is dropped whole.
class Line {
 public:
  void Add(const char* format, ...) __attribute__((format(printf, 2, 3))) {
    if (overflow_) return;
    va_list args;
    va_start(args, format);
    const int n = std::vsnprintf(buf_ + used_, sizeof(buf_) - used_, format, args);
    va_end(args);
    if (n < 0 || static_cast<std::size_t>(n) >= sizeof(buf_) - used_) {
      overflow_ = true;
      return;
    }
    used_ += static_cast<std::size_t>(n);
  }
  bool ok() const { return !overflow_; }
  const char* data() const { return buf_; }
  std::size_t size() const { return used_; }

 private:
  char buf_[kRecordBytes];
  std::size_t used_ = 0;
  bool overflow_ = false;
};

unsigned long long U(std::uint64_t v) { return static_cast<unsigned long long>(v); }

/// {"name":value,...}: the values, or (with `base`) the counters' deltas from it.
void AddObject(Line& line, const swap::CounterValues& values, const swap::CounterValues* base) {
  line.Add("{");
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::uint64_t v = values[i];
    if (base != nullptr && kExecutorCounters[i].kind == CounterKind::kCounter) v -= (*base)[i];
    line.Add("%s\"%s\":%llu", i == 0 ? "" : ",", kExecutorCounters[i].stat, U(v));
  }
  line.Add("}");
}

}  // namespace

std::string FormatCounterPairs(const swap::CounterValues& values) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    out += ' ';
    out += kExecutorCounters[i].stat;
    out += '=';
    out += std::to_string(values[i]);
  }
  return out;
}

StatsFile::~StatsFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool StatsFile::Open(const char* path) {
  fd_ = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  return fd_ >= 0;
}

void StatsFile::Write(const char* event, const swap::CounterValues& now, std::uint64_t generation,
                      std::uint64_t limit) {
  if (fd_ < 0) return;
  Line line;
  line.Add(
      "{\"event\":\"%s\",\"pid\":%d,\"iteration\":%llu,\"generation_in_force\":%llu,"
      "\"limit\":%llu,\"counters\":",
      event, static_cast<int>(::getpid()), U(now[kIterationsIndex]), U(generation), U(limit));
  AddObject(line, now, &previous_);
  line.Add(",\"totals\":");
  AddObject(line, now, nullptr);
  line.Add("}\n");
  previous_ = now;
  if (!line.ok()) return;
  // One write: a short write to a regular file means the disk is full; nothing to retry.
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
}

}  // namespace chameleon::shim
