#include "process_start.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace chameleon::simgpu {

bool ParseProcStat(const char* text, std::size_t len, ProcessStatus* out) {
  const char* close = nullptr;
  for (std::size_t i = 0; i < len; ++i)
    if (text[i] == ')') close = text + i;
  if (!close || close + 2 >= text + len || close[1] != ' ') return false;
  const char state = close[2];
  // Fields after the command: 3 state, 4 ppid, ... 22 starttime: the 19th after state.
  const char* p = close + 3;
  const char* end = text + len;
  for (int field = 4; field <= 22; ++field) {
    while (p < end && *p == ' ') ++p;
    if (p >= end) return false;
    if (field == 22) {
      char* stop = nullptr;
      errno = 0;
      const unsigned long long v = std::strtoull(p, &stop, 10);
      if (errno != 0 || stop == p) return false;
      out->start_time = v;
      out->running = state != 'Z' && state != 'X' && state != 'x';
      return true;
    }
    while (p < end && *p != ' ') ++p;
  }
  return false;
}

ProcessStatus ReadProcessStatus(pid_t pid) {
  ProcessStatus status;
  if (pid <= 0) return status;
  char path[48];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return status;
  char buf[1024];  // a stat line is ~300 bytes; the command is at most 64 of them
  const ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return status;
  ProcessStatus parsed;
  if (ParseProcStat(buf, static_cast<std::size_t>(n), &parsed)) status = parsed;
  return status;
}

}  // namespace chameleon::simgpu
