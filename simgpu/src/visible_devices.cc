#include "visible_devices.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "config.h"

namespace chameleon::simgpu {
namespace {

constexpr std::string_view kUuidPrefix = "simgpu";

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

// A decimal index in [0, n), or -1.
int ParseIndex(std::string_view s, int n) {
  if (s.empty() || s.size() > 2) return -1;
  int v = 0;
  for (char ch : s) {
    if (ch < '0' || ch > '9') return -1;
    v = v * 10 + (ch - '0');
  }
  return v < n ? v : -1;
}

int HexDigit(char ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" of a node device in [0, n), or -1.
int ParseUuid(std::string_view s, int n) {
  if (s.size() != 40 || s.substr(0, 4) != "GPU-") return -1;
  std::array<unsigned char, 16> bytes{};
  std::size_t nibble = 0;
  for (std::size_t i = 4; i < s.size(); ++i) {
    const bool dash_here = i == 12 || i == 17 || i == 22 || i == 27;
    if (dash_here != (s[i] == '-')) return -1;
    if (dash_here) continue;
    const int h = HexDigit(s[i]);
    if (h < 0) return -1;
    bytes[nibble / 2] = static_cast<unsigned char>(bytes[nibble / 2] << 4 | h);
    ++nibble;
  }
  const int index = bytes[15];
  return index < n && bytes == NodeDeviceUuid(index) ? index : -1;
}

}  // namespace

std::array<unsigned char, 16> NodeDeviceUuid(int node_index) {
  std::array<unsigned char, 16> b{};
  for (std::size_t i = 0; i < kUuidPrefix.size(); ++i)
    b[i] = static_cast<unsigned char>(kUuidPrefix[i]);
  b[15] = static_cast<unsigned char>(node_index);
  return b;
}

std::string NodeDeviceUuidString(int node_index) {
  const auto b = NodeDeviceUuid(node_index);
  char s[41];
  std::snprintf(s, sizeof s,
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return s;
}

std::string ParseVisibleDevices(std::string_view text, int node_devices, std::vector<int>* out) {
  std::vector<int> list;
  if (Trim(text).empty()) return "CUDA_VISIBLE_DEVICES is empty: no device is visible";
  while (true) {
    const std::size_t comma = text.find(',');
    const std::string_view entry = Trim(text.substr(0, comma));
    const int index = entry.substr(0, 4) == "GPU-" ? ParseUuid(entry, node_devices)
                                                   : ParseIndex(entry, node_devices);
    const std::string quoted = "'" + std::string(entry) + "'";
    if (entry.substr(0, 4) == "MIG-")
      return "CUDA_VISIBLE_DEVICES: " + quoted + ": MIG instances are not simulated";
    if (index < 0)
      return "CUDA_VISIBLE_DEVICES: " + quoted + " is not a device of this node (indices 0.." +
             std::to_string(node_devices - 1) + " or their UUIDs, GPU-" +
             NodeDeviceUuidString(0).substr(4, 28) + "..)";
    for (int seen : list)
      if (seen == index) return "CUDA_VISIBLE_DEVICES: " + quoted + " is listed twice";
    list.push_back(index);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  *out = std::move(list);
  return "";
}

std::string ApplyVisibleDevices(Config* c, bool* empty) {
  *empty = false;
  c->node_device_count = c->device_count;
  std::vector<int> visible;
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  if (!env) {
    for (int i = 0; i < c->device_count; ++i) visible.push_back(i);
  } else if (std::string error = ParseVisibleDevices(env, c->device_count, &visible);
             !error.empty()) {
    *empty = Trim(env).empty();
    return error;
  }
  const Config node = *c;
  const std::size_t n = visible.size();
  c->device_count = static_cast<int>(n);
  c->node_index = visible;
  c->memory_bytes.assign(n, 0);
  c->numa_node.assign(n, 0);
  c->peer_bandwidth.assign(n, std::vector<double>(n, 0.0));
  for (std::size_t i = 0; i < n; ++i) {
    const auto a = static_cast<std::size_t>(visible[i]);
    c->memory_bytes[i] = node.memory_bytes[a];
    c->numa_node[i] = node.numa_node[a];
    for (std::size_t j = 0; j < n; ++j)
      c->peer_bandwidth[i][j] = node.peer_bandwidth[a][static_cast<std::size_t>(visible[j])];
  }
  return "";
}

}  // namespace chameleon::simgpu
