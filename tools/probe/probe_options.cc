#include "probe_options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::probe {
namespace {

bool ParseInt(const std::string& text, long min, long max, long* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

std::string ParseDevices(const std::string& text, std::vector<int>* out) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    long d = 0;
    if (!ParseInt(text.substr(start, comma - start), 0, 1023, &d))
      return "--devices '" + text + "': expected a comma-separated list of device indices";
    out->push_back(static_cast<int>(d));
    start = comma + 1;
  }
  return "";
}

std::string Apply(std::string_view name, const std::string& value, ProbeOptions* o) {
  if (name == "--bytes") {
    const ipc::ByteSize size = ipc::ParseByteSize(value);
    if (!size)
      return "--bytes '" + value + "': " + size.error + "; expected " + ipc::kByteSizeForms;
    if (size.bytes == 0 || size.bytes > kMaxBytes) return "--bytes must be in (0, 16GiB]";
    o->bytes = size.bytes;
    return "";
  }
  if (name == "--trials") {
    long t = 0;
    if (!ParseInt(value, 1, kMaxTrials, &t)) return "--trials '" + value + "': expected 1..100000";
    o->trials = static_cast<int>(t);
    return "";
  }
  return ParseDevices(value, &o->devices);  // --devices
}

}  // namespace

ParsedProbeOptions ParseProbeOptions(int argc, const char* const* argv) {
  ParsedProbeOptions r;
  for (int i = 1; i < argc && r.error.empty(); ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      r.options.help = true;
      return r;
    }
    if (arg == "--yaml") {
      r.options.yaml = true;
      continue;
    }
    std::string value;
    const auto eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
    }
    if (arg != "--bytes" && arg != "--trials" && arg != "--devices") {
      r.error = "unknown argument '" + arg + "'";
      break;
    }
    if (eq == std::string::npos) {
      if (i + 1 >= argc) {
        r.error = arg + " needs a value";
        break;
      }
      value = argv[++i];
    }
    r.error = Apply(arg, value, &r.options);
  }
  return r;
}

std::string CheckDevices(const std::vector<int>& devices, int count) {
  for (std::size_t i = 0; i < devices.size(); ++i) {
    if (devices[i] >= count)
      return "--devices: device " + std::to_string(devices[i]) + " does not exist (" +
             std::to_string(count) + " device(s))";
    if (std::find(devices.begin(), devices.begin() + static_cast<long>(i), devices[i]) !=
        devices.begin() + static_cast<long>(i))
      return "--devices: device " + std::to_string(devices[i]) + " given twice";
  }
  return "";
}

const char* ProbeUsage() {
  return "usage: chameleon-probe [--bytes SIZE] [--trials N] [--devices 0,1,...] [--yaml]\n"
         "  Measures host<->device bandwidth with pinned memory per NUMA node, peer bandwidth per\n"
         "  GPU pair (copies timed by CUDA events) and the latency of cuMemCreate, cuMemMap,\n"
         "  cuMemSetAccess, cuMemUnmap, cuMemRelease (wall clock, median and p99). --yaml prints\n"
         "  a SIMGPU_TOPOLOGY file (docs/simgpu.md). Defaults: --bytes 64MiB --trials 10.\n";
}

}  // namespace chameleon::probe
