// Opening the node ledger's shared file: create it (O_EXCL: exactly one creator), or map one
// another process made and check it is a ledger of this node before trusting any of it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>

#include "node_ledger.h"

namespace chameleon::simgpu {
namespace {

// A creator maps and fills the file within microseconds of creating it; one that has not
// published after 2 s died half-way (the file then has to be removed by hand).
constexpr int kReadyPolls = 2000;
constexpr long kReadyPollNs = 1'000'000;

bool ValidName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    if (!ok) return false;
  }
  return true;
}

void PollPause() {
  timespec ts{0, kReadyPollNs};
  nanosleep(&ts, nullptr);
}

std::string Describe(std::uint32_t devices, const char* machine, std::uint64_t capacity) {
  return std::string(machine) + " with " + std::to_string(devices) + " device(s) of " +
         std::to_string(capacity) + " bytes";
}

void Fill(LedgerFile* f, const NodeLedger::Identity& id) {
  new (f) LedgerFile{};  // zero everything: the atomics start at 0, version (not ready) too
  LedgerHeader& h = f->header;
  h.magic = kLedgerMagic;
  h.header_bytes = sizeof(LedgerHeader);
  h.file_bytes = sizeof(LedgerFile);
  h.device_count = static_cast<std::uint32_t>(id.capacity.size());
  h.slot_count = kLedgerSlots;
  h.devices_offset = offsetof(LedgerFile, devices);
  h.slots_offset = offsetof(LedgerFile, slots);
  h.creator_pid = static_cast<std::uint64_t>(getpid());
  id.machine.copy(h.machine, kLedgerMachineBytes - 1);
  for (std::size_t d = 0; d < id.capacity.size(); ++d) h.capacity[d] = id.capacity[d];
  h.version.store(kLedgerVersion, std::memory_order_release);  // last: now readers may use it
}

// "" if `f` is a ready ledger of layout kLedgerVersion made for `id`.
std::string Check(const LedgerFile* f, const NodeLedger::Identity& id) {
  const LedgerHeader& h = f->header;
  if (h.magic != kLedgerMagic) return "not a simgpu node ledger (bad magic)";
  const std::uint32_t version = h.version.load(std::memory_order_acquire);
  if (version != kLedgerVersion)
    return "ledger layout version " + std::to_string(version) + ", this simgpu needs " +
           std::to_string(kLedgerVersion);
  if (h.header_bytes != sizeof(LedgerHeader) || h.file_bytes != sizeof(LedgerFile) ||
      h.slot_count != kLedgerSlots || h.devices_offset != offsetof(LedgerFile, devices) ||
      h.slots_offset != offsetof(LedgerFile, slots) || h.device_count == 0 ||
      h.device_count > kLedgerMaxDevices || !std::memchr(h.machine, 0, kLedgerMachineBytes))
    return "malformed ledger header";
  std::string mine(id.machine, 0, kLedgerMachineBytes - 1);
  bool same = mine == h.machine && h.device_count == id.capacity.size();
  for (std::size_t d = 0; same && d < id.capacity.size(); ++d)
    same = h.capacity[d] == id.capacity[d];
  if (same) return "";
  return "the ledger was made for " + Describe(h.device_count, h.machine, h.capacity[0]) +
         " (by pid " + std::to_string(h.creator_pid) + "); this process is " +
         Describe(static_cast<std::uint32_t>(id.capacity.size()), mine.c_str(), id.capacity[0]) +
         ": give every process of one node the same SIMGPU_MACHINE, SIMGPU_DEVICES, "
         "SIMGPU_MEMORY and SIMGPU_TOPOLOGY";
}

// Maps an existing ledger once its creator has sized it; waits (bounded) for that.
std::string MapExisting(int fd, LedgerFile** out) {
  struct stat st {};
  for (int i = 0;; ++i) {
    if (fstat(fd, &st) != 0) return std::string("fstat: ") + std::strerror(errno);
    if (!S_ISREG(st.st_mode) || st.st_uid != geteuid()) return "not a regular file of this user";
    if (st.st_size == static_cast<off_t>(sizeof(LedgerFile))) break;
    if (st.st_size != 0)
      return "file of " + std::to_string(st.st_size) + " bytes, a ledger has " +
             std::to_string(sizeof(LedgerFile));
    if (i == kReadyPolls) return "its creator never sized it (died while creating it?)";
    PollPause();
  }
  void* p = mmap(nullptr, sizeof(LedgerFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return std::string("mmap: ") + std::strerror(errno);
  auto* f = static_cast<LedgerFile*>(p);
  for (int i = 0; f->header.version.load(std::memory_order_acquire) == 0; ++i) {
    if (i == kReadyPolls) {
      munmap(p, sizeof(LedgerFile));
      return "its creator never finished it (died while creating it?)";
    }
    PollPause();
  }
  *out = f;
  return "";
}

std::string Create(int fd, const NodeLedger::Identity& id, LedgerFile** out) {
  if (ftruncate(fd, static_cast<off_t>(sizeof(LedgerFile))) != 0)
    return std::string("ftruncate: ") + std::strerror(errno);
  void* p = mmap(nullptr, sizeof(LedgerFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return std::string("mmap: ") + std::strerror(errno);
  *out = static_cast<LedgerFile*>(p);
  Fill(*out, id);
  return "";
}

std::string MapLedger(const std::string& path, const NodeLedger::Identity& id, LedgerFile** out) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd >= 0) {
    std::string error = Create(fd, id, out);
    close(fd);
    return error;
  }
  if (errno != EEXIST) return std::string("cannot create: ") + std::strerror(errno);
  fd = open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return std::string("cannot open: ") + std::strerror(errno);
  std::string error = MapExisting(fd, out);
  close(fd);
  if (!error.empty()) return error;
  error = Check(*out, id);
  if (!error.empty()) munmap(*out, sizeof(LedgerFile));
  return error;
}

}  // namespace

std::string NodeLedger::PathFor(const std::string& name) {
  return "/dev/shm/simgpu-node-" + name + "-" + std::to_string(geteuid());
}

std::string NodeLedger::Open(const std::string& name, const Identity& id,
                             std::unique_ptr<NodeLedger>* out) {
  const std::string prefix = "SIMGPU_NODE " + name + ": ";
  if (!ValidName(name))
    return "SIMGPU_NODE must be 1-64 characters of [A-Za-z0-9._-], not starting with '.'";
  if (id.capacity.empty() || id.capacity.size() > kLedgerMaxDevices)
    return prefix + "a node has 1..16 devices";
  const std::string path = PathFor(name);
  LedgerFile* file = nullptr;
  if (std::string error = MapLedger(path, id, &file); !error.empty())
    return prefix + path + ": " + error;
  std::unique_ptr<NodeLedger> ledger(new NodeLedger(file, path));
  ledger->ReclaimStale();
  if (!ledger->ClaimSlot())
    return prefix + path + ": all " + std::to_string(kLedgerSlots) +
           " process slots are held by running processes";
  *out = std::move(ledger);
  return "";
}

}  // namespace chameleon::simgpu
