#include "chameleon/policy/policy_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "chameleon/policy/explain.h"

namespace chameleon::policy {
namespace {

template <typename WriteFn>
bool WriteFile(const std::string& path, std::string* error, WriteFn write) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    if (error) *error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  write(out);
  out.flush();
  if (!out) {
    if (error) *error = "cannot write " + path;
    return false;
  }
  return true;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool WriteMemoryTimelineFile(const Plan& plan, const std::string& path, std::string* error) {
  if (EndsWith(path, ".svg")) {
    return WriteFile(path, error, [&](std::ostream& out) { WriteMemoryTimelineSvg(plan, out); });
  }
  return WriteFile(path, error, [&](std::ostream& out) {
    WriteMemoryTimelineGnuplot(plan, path + ".png", out);
  });
}

bool WritePlanCsvFile(const Plan& plan, const Profile& profile, const std::string& path,
                      std::string* error) {
  return WriteFile(path, error, [&](std::ostream& out) { WritePlanCsv(plan, profile, out); });
}

}  // namespace chameleon::policy
