#include "chameleon/topology/host_memory.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::topology {
namespace {

constexpr std::string_view kKey = "host_numa_bytes";
// More NUMA nodes than any x86 or Grace node has today; a longer list is a typo, not a machine.
constexpr std::size_t kMaxNumaNodes = 64;
// The last resort when even sysconf fails: the shim's old fallback, so behaviour there is
// unchanged.
constexpr std::uint64_t kUnknownRamBytes = 8ull << 30;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::string_view StripComment(std::string_view s) {
  const auto hash = s.find('#');
  return Trim(hash == std::string_view::npos ? s : s.substr(0, hash));
}

// One list item: a byte size, optionally in matching single or double quotes.
std::string ParseItem(std::string_view item, std::vector<std::uint64_t>* out) {
  item = Trim(item);
  if (item.size() >= 2 && (item.front() == '"' || item.front() == '\'') &&
      item.back() == item.front()) {
    item = Trim(item.substr(1, item.size() - 2));
  }
  const ipc::ByteSize size = ipc::ParseByteSize(item);
  if (!size) return std::string("expected a byte size: ") + size.error;
  if (size.bytes == 0) return "a NUMA node's memory must be > 0";
  if (out->size() == kMaxNumaNodes) return "more than 64 NUMA nodes";
  out->push_back(size.bytes);
  return "";
}

std::string ParseFlowList(std::string_view value, std::vector<std::uint64_t>* out) {
  if (value.size() < 2 || value.front() != '[' || value.back() != ']')
    return "write it as [size, ...] on one line or as a block list";
  std::string_view rest = value.substr(1, value.size() - 2);
  while (true) {
    const auto comma = rest.find(',');
    if (std::string error = ParseItem(rest.substr(0, comma), out); !error.empty()) return error;
    if (comma == std::string_view::npos) return "";
    rest.remove_prefix(comma + 1);
  }
}

// Whether the next line still belongs to a block list: indented, blank, a comment, or an item
// at column 0 (YAML allows "- x" at the key's own indentation).
bool InBlock(std::istringstream& in) {
  const int c = in.peek();
  return c == ' ' || c == '\t' || c == '#' || c == '\r' || c == '\n' || c == '-';
}

// Block list items follow the key, one "- size" per line; the list ends at the next line that
// starts at column 0 with anything else.
std::string ParseBlockList(std::istringstream& in, std::vector<std::uint64_t>* out) {
  std::string line;
  while (InBlock(in)) {
    std::getline(in, line);
    const std::string_view item = StripComment(line);
    if (item.empty()) continue;
    if (item.front() != '-') return "block list items must start with '-'";
    if (std::string error = ParseItem(item.substr(1), out); !error.empty()) return error;
  }
  return out->empty() ? "write it as [size, ...] on one line or as a block list" : "";
}

std::string ReadFile(const std::string& path, std::string* text) {
  std::ifstream in(path);
  if (!in) return "cannot read " + path;
  std::stringstream s;
  s << in.rdbuf();
  *text = s.str();
  return "";
}

// MemTotal of one sysfs meminfo file ("Node 0 MemTotal:  32768000 kB"), in bytes; 0 if absent.
std::uint64_t MemTotal(const std::string& text) {
  const auto at = text.find("MemTotal:");
  if (at == std::string::npos) return 0;
  const char* p = text.c_str() + at + 9;
  char* end = nullptr;
  const unsigned long long kib = std::strtoull(p, &end, 10);
  if (end == p || kib == 0 || kib > (UINT64_MAX >> 10)) return 0;
  while (*end == ' ' || *end == '\t') ++end;
  if (end[0] != 'k' || end[1] != 'B') return 0;
  return static_cast<std::uint64_t>(kib) << 10;
}

std::uint64_t PhysicalRam() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return kUnknownRamBytes;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page);
}

void AddWarning(std::string* all, const std::string& one) {
  if (!all->empty()) *all += "; ";
  *all += one;
}

}  // namespace

std::uint64_t HostMemory::total() const {
  std::uint64_t sum = 0;
  for (const std::uint64_t b : numa_bytes) sum += b;
  return sum;
}

std::string ParseHostNumaBytes(std::string_view yaml_text, std::vector<std::uint64_t>* out,
                               bool* present) {
  *present = false;
  std::vector<std::uint64_t> nodes;
  std::istringstream in{std::string(yaml_text)};
  std::string line;
  while (std::getline(in, line)) {
    const std::string_view l(line);
    if (l.substr(0, kKey.size()) != kKey) continue;
    const std::string_view after = Trim(l.substr(kKey.size()));
    if (after.empty() || after.front() != ':') continue;  // a longer key, e.g. host_numa_bytes_x
    if (*present) return std::string(kKey) + ": given twice";
    *present = true;
    const std::string_view value = StripComment(after.substr(1));
    const std::string error =
        value.empty() ? ParseBlockList(in, &nodes) : ParseFlowList(value, &nodes);
    if (!error.empty()) return std::string(kKey) + ": " + error;
  }
  if (*present) *out = std::move(nodes);
  return "";
}

std::string ReadSysfsNodeMemory(const std::string& root, std::vector<std::uint64_t>* out) {
  std::vector<std::uint64_t> nodes;
  for (std::size_t n = 0; n < kMaxNumaNodes; ++n) {
    const std::string path = root + "/node" + std::to_string(n) + "/meminfo";
    std::string text;
    if (!ReadFile(path, &text).empty()) break;
    const std::uint64_t bytes = MemTotal(text);
    if (bytes == 0) return path + ": no MemTotal in kB";
    nodes.push_back(bytes);
  }
  if (nodes.empty()) return "no " + root + "/node0/meminfo";
  *out = std::move(nodes);
  return "";
}

HostMemory ReadHostMemory(const HostMemoryOptions& options) {
  HostMemory h;
  if (!options.topology_path.empty()) {
    std::string text;
    std::string error = ReadFile(options.topology_path, &text);
    bool present = false;
    if (error.empty()) error = ParseHostNumaBytes(text, &h.numa_bytes, &present);
    if (error.empty() && !present) error = "no host_numa_bytes key";
    if (error.empty()) {
      h.source = HostMemorySource::kTopologyFile;
      return h;
    }
    AddWarning(&h.warning, "CHAMELEON_TOPOLOGY " + options.topology_path + ": " + error);
  }
  if (const std::string error = ReadSysfsNodeMemory(options.sysfs_node_root, &h.numa_bytes);
      error.empty()) {
    h.source = HostMemorySource::kSysfs;
    return h;
  } else {
    AddWarning(&h.warning, error + ": using this machine's physical RAM as one NUMA node");
  }
  h.numa_bytes.assign(1, PhysicalRam());
  h.source = HostMemorySource::kPhysicalRam;
  return h;
}

const char* HostMemorySourceName(HostMemorySource source) {
  switch (source) {
    case HostMemorySource::kTopologyFile:
      return "topology file";
    case HostMemorySource::kSysfs:
      return "sysfs";
    case HostMemorySource::kPhysicalRam:
      return "physical RAM";
  }
  return "physical RAM";
}

}  // namespace chameleon::topology
