#include "install_paths.h"

#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>

namespace chameleon::run {
namespace {

bool IsFile(const std::string& path, bool executable) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return !executable || ::access(path.c_str(), X_OK) == 0;
}

// The first candidate that exists, as a canonical path (LD_PRELOAD and messages stay readable).
std::string FirstExisting(std::initializer_list<std::string> candidates, bool executable) {
  for (const auto& c : candidates) {
    if (!IsFile(c, executable)) continue;
    char resolved[PATH_MAX];
    return ::realpath(c.c_str(), resolved) != nullptr ? resolved : c;
  }
  return "";
}

}  // namespace

std::string ExecutableDir() {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  const std::string path(buf, static_cast<std::size_t>(n));
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

std::string FindShimLibrary(const std::string& exe_dir) {
  if (const char* env = std::getenv("CHAMELEON_LIBRARY"); env && *env) return env;
  if (exe_dir.empty()) return "";
  return FirstExisting(
      {exe_dir + "/../lib/libchameleon.so", exe_dir + "/../lib/chameleon/libchameleon.so"}, false);
}

std::string FindDaemon(const std::string& exe_dir) {
  if (exe_dir.empty()) return "";
  return FirstExisting({exe_dir + "/chameleond", exe_dir + "/../sbin/chameleond"}, true);
}

std::string AppendPreload(const std::string& existing, const std::string& library) {
  // ld.so splits LD_PRELOAD on colons and spaces.
  std::string item;
  for (char c : existing + ":") {
    if (c == ':' || c == ' ') {
      if (item == library) return existing;
      item.clear();
    } else {
      item += c;
    }
  }
  if (existing.empty()) return library;
  return existing + ":" + library;
}

}  // namespace chameleon::run
