#include "node_sysfs.h"

#include <fstream>
#include <sstream>

namespace chameleon::topology::detail {
namespace {

// ACPI SLIT: 10 is local, 255 unreachable; anything else outside that range is corrupt.
constexpr int kLocalDistance = 10;
constexpr int kRemoteDistance = 21;
constexpr int kMaxDistance = 254;

std::string ReadRow(const std::string& path, std::size_t count, std::vector<int>* row) {
  std::ifstream in(path);
  if (!in) return "cannot read " + path;
  std::string line;
  std::getline(in, line);
  std::istringstream fields(line);
  int d = 0;
  while (fields >> d) {
    if (d < kLocalDistance || d > kMaxDistance) return path + ": distance outside 10..254";
    row->push_back(d);
  }
  if (!fields.eof()) return path + ": not a row of integers";
  if (row->size() != count)
    return path + ": " + std::to_string(row->size()) + " distances for " + std::to_string(count) +
           " nodes";
  return "";
}

}  // namespace

std::string ReadNumaDistances(const std::string& root, std::size_t count,
                              std::vector<std::vector<int>>* out) {
  std::vector<std::vector<int>> rows(count);
  for (std::size_t n = 0; n < count; ++n) {
    const std::string path = root + "/node" + std::to_string(n) + "/distance";
    if (std::string error = ReadRow(path, count, &rows[n]); !error.empty()) return error;
    if (rows[n][n] != kLocalDistance) return path + ": a node's distance to itself must be 10";
  }
  *out = std::move(rows);
  return "";
}

int ReadPciNumaNode(const std::string& pci_root, const std::string& bus_id) {
  std::ifstream in(pci_root + "/" + bus_id + "/numa_node");
  int node = -1;
  // The kernel writes -1 when the platform does not say; 64 bounds it like host_memory.h.
  if (!(in >> node) || node < 0 || node >= 64) return -1;
  return node;
}

std::vector<std::vector<int>> DefaultNumaDistances(std::size_t count) {
  std::vector<std::vector<int>> rows(count, std::vector<int>(count, kRemoteDistance));
  for (std::size_t n = 0; n < count; ++n) rows[n][n] = kLocalDistance;
  return rows;
}

}  // namespace chameleon::topology::detail
