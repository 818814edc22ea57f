#include "config_lending.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace chameleon::daemon::detail {
namespace {

constexpr const char* kPath = "lending";

// "DDDD:BB:DD.F" in hex, as CUDA and NVML print a PCI bus id; returned lower-case, the form the
// shim reports in HELLO. Empty when `text` is not one.
std::string NormaliseBusId(const std::string& text) {
  static constexpr const char kShape[] = "xxxx:xx:xx.x";
  if (text.size() != sizeof(kShape) - 1) return {};
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (kShape[i] == 'x' ? !std::isxdigit(c) : c != static_cast<unsigned char>(kShape[i])) {
      return {};
    }
    out.push_back(static_cast<char>(std::tolower(c)));
  }
  return out;
}

void ReadGpus(ConfigReader& r, const YAML::Node& n, LendingOptions* out) {
  const YAML::Node gpus = n["gpus"];
  if (!gpus.IsDefined()) return;
  const std::string path = ConfigReader::Join(kPath, "gpus");
  if (gpus.IsScalar() && gpus.Scalar() == "all") {
    out->all_gpus = true;
    out->gpus.clear();
    return;
  }
  if (!gpus.IsSequence()) {
    r.Error(path, "expected 'all' or a list of PCI bus ids, got " + ConfigReader::Describe(gpus));
    return;
  }
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const std::string id = gpus[i].IsScalar() ? NormaliseBusId(gpus[i].Scalar()) : std::string();
    if (id.empty()) {
      r.Error(path + "[" + std::to_string(i) + "]",
              "expected a PCI bus id such as 0000:18:00.0, got " + ConfigReader::Describe(gpus[i]));
      return;
    }
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  out->all_gpus = false;
  out->gpus = std::move(ids);
}

void ReadUids(ConfigReader& r, const YAML::Node& n, const char* key, UidRule* out) {
  const YAML::Node uids = n[key];
  if (!uids.IsDefined()) return;
  const std::string path = ConfigReader::Join(kPath, key);
  if (uids.IsScalar() && uids.Scalar() == "all") {
    *out = UidRule{};
    return;
  }
  if (!uids.IsSequence()) {
    r.Error(path, "expected 'all' or a list of uids, got " + ConfigReader::Describe(uids));
    return;
  }
  UidRule rule{false, {}};
  for (std::size_t i = 0; i < uids.size(); ++i) {
    std::uint32_t uid = 0;
    const std::string text = uids[i].IsScalar() ? uids[i].Scalar() : std::string();
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), uid);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
      r.Error(
          path + "[" + std::to_string(i) + "]",
          "expected a uid (an integer in [0, 4294967295]), got " + ConfigReader::Describe(uids[i]));
      return;
    }
    rule.uids.push_back(uid);
  }
  *out = std::move(rule);
}

void ReadPlacement(ConfigReader& r, const YAML::Node& n, LendingOptions* out) {
  std::string placement = out->node_placement ? "node" : "host";
  r.String(n, kPath, "placement", &placement);
  if (placement != "node" && placement != "host") {
    r.Error(ConfigReader::Join(kPath, "placement"),
            "expected 'node' (peer GPUs and NUMA nodes) or 'host' (host memory only), got '" +
                placement + "'");
    return;
  }
  out->node_placement = placement == "node";
}

}  // namespace

void ReadLending(ConfigReader& r, const YAML::Node& n, LendingOptions* out) {
  if (!n.IsDefined() || !r.CheckMap(n, kPath,
                                    {"placement", "gpus", "lender_uids", "borrower_uids", "reserve",
                                     "revoke_deadline_ms"})) {
    return;
  }
  ReadPlacement(r, n, out);
  ReadGpus(r, n, out);
  ReadUids(r, n, "lender_uids", &out->lenders);
  ReadUids(r, n, "borrower_uids", &out->borrowers);
  r.Bytes(n, kPath, "reserve", 0, &out->reserve_bytes);
  // 10 ms: below that a lessee cannot even pick the new policy up; 10 min: longer is no deadline.
  r.MillisToNanos(n, kPath, "revoke_deadline_ms", 10, 600'000, &out->revoke_deadline_ns);
}

namespace {

void EmitUids(YAML::Emitter& out, const char* key, const UidRule& rule) {
  out << YAML::Key << key << YAML::Value;
  if (rule.all) {
    out << "all";
    return;
  }
  out << YAML::Flow << YAML::BeginSeq;
  for (std::uint32_t uid : rule.uids) out << uid;
  out << YAML::EndSeq;
}

}  // namespace

void EmitLending(YAML::Emitter& out, const LendingOptions& l) {
  out << YAML::Key << "lending" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "placement" << YAML::Value << (l.node_placement ? "node" : "host");
  out << YAML::Key << "gpus" << YAML::Value;
  if (l.all_gpus) {
    out << "all";
  } else {
    out << YAML::Flow << YAML::BeginSeq;
    for (const std::string& gpu : l.gpus) out << YAML::DoubleQuoted << gpu;
    out << YAML::EndSeq;
  }
  EmitUids(out, "lender_uids", l.lenders);
  EmitUids(out, "borrower_uids", l.borrowers);
  out << YAML::Key << "reserve" << YAML::Value << l.reserve_bytes;
  out << YAML::Key << "revoke_deadline_ms" << YAML::Value << l.revoke_deadline_ns / 1'000'000;
  out << YAML::EndMap;
}

}  // namespace chameleon::daemon::detail
