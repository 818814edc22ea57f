#include "chameleon/daemon/socket_group.h"

#include <grp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace chameleon::daemon {

std::string ApplySocketGroup(const std::string& path, const std::string& group) {
  if (group.empty()) return "";
  // getgrnam_r: other threads (prometheus-cpp's) may use the group database too.
  std::vector<char> buffer(16384);
  struct group entry {};
  struct group* found = nullptr;
  int rc = ERANGE;
  while (rc == ERANGE && buffer.size() <= (1u << 20)) {
    rc = getgrnam_r(group.c_str(), &entry, buffer.data(), buffer.size(), &found);
    if (rc == ERANGE) buffer.resize(buffer.size() * 4);
  }
  if (rc != 0) return "cannot look up group '" + group + "': " + std::strerror(rc);
  if (found == nullptr) return "group '" + group + "' does not exist";
  if (chown(path.c_str(), static_cast<uid_t>(-1), found->gr_gid) != 0) {
    return "chgrp " + group + " " + path + ": " + std::strerror(errno);
  }
  return "";
}

}  // namespace chameleon::daemon
