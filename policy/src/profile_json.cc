// Profile <-> JSON with nlohmann-json. Reading validates every field and index so a profile
// from another process or a hand-edited file can never make the policy code index out of range.
#include "chameleon/policy/profile_json.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace chameleon::policy {
namespace {

using nlohmann::json;

constexpr const char* kFormatName = "chameleon-profile";

[[noreturn]] void Fail(const std::string& where, const std::string& what) {
  throw ProfileFormatError(where + ": " + what);
}

const json& Field(const json& obj, const char* key, const std::string& where) {
  if (!obj.is_object()) Fail(where, "expected object");
  auto it = obj.find(key);
  if (it == obj.end()) Fail(where + "." + key, "missing");
  return *it;
}

std::uint64_t Unsigned(const json& v, const std::string& where) {
  if (!v.is_number_unsigned()) Fail(where, "expected non-negative integer");
  return v.get<std::uint64_t>();
}

std::int64_t Signed(const json& v, const std::string& where, std::int64_t lo, std::int64_t hi) {
  if (!v.is_number_integer()) Fail(where, "expected integer");
  const std::int64_t x = v.get<std::int64_t>();
  if (x < lo || x > hi)
    Fail(where, std::to_string(x) + " out of range [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
  return x;
}

std::vector<std::uint32_t> Indices(const json& v, const std::string& where, std::size_t limit,
                                   const char* what, bool ascending) {
  if (!v.is_array()) Fail(where, "expected array");
  std::vector<std::uint32_t> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const std::uint64_t x = Unsigned(v[i], at);
    if (x >= limit)
      Fail(at, std::string(what) + " index " + std::to_string(x) + " out of range (" +
                   std::to_string(limit) + " " + what + "s)");
    if (ascending && !out.empty() && x <= out.back()) Fail(at, "not ascending");
    out.push_back(static_cast<std::uint32_t>(x));
  }
  return out;
}

Phase ParsePhase(const json& v, const std::string& where) {
  if (!v.is_string()) Fail(where, "expected string");
  for (Phase p : {Phase::kUnknown, Phase::kForward, Phase::kBackward, Phase::kOptimizer}) {
    if (v == PhaseName(p)) return p;
  }
  Fail(where, "unknown phase '" + v.get<std::string>() + "'");
}

ProfileOp ParseOp(const json& v, const std::string& where, std::size_t tensors) {
  ProfileOp op;
  const std::uint64_t token = Unsigned(Field(v, "token", where), where + ".token");
  if (token > UINT32_MAX) Fail(where + ".token", "exceeds 32 bits");
  op.token = static_cast<std::uint32_t>(token);
  const json& name = Field(v, "name", where);
  if (!name.is_string()) Fail(where + ".name", "expected string");
  op.name = name.get<std::string>();
  op.phase = ParsePhase(Field(v, "phase", where), where + ".phase");
  op.reads = Indices(Field(v, "reads", where), where + ".reads", tensors, "tensor", false);
  op.writes = Indices(Field(v, "writes", where), where + ".writes", tensors, "tensor", false);
  op.bytes_live_after = Unsigned(Field(v, "bytes_live_after", where), where + ".bytes_live_after");
  if (v.contains("device_s")) {  // optional: not measured when absent
    const json& s = v["device_s"];
    if (!s.is_number() || !std::isfinite(s.get<double>()) || s.get<double>() < 0) {
      Fail(where + ".device_s", "expected a finite non-negative number");
    }
    op.device_s = s.get<double>();
  }
  return op;
}

ProfileTensor ParseTensor(const json& v, const std::string& where, std::size_t ops) {
  ProfileTensor t;
  const auto last = static_cast<std::int64_t>(ops) - 1;
  t.external_id = Unsigned(Field(v, "external_id", where), where + ".external_id");
  t.bytes = Unsigned(Field(v, "bytes", where), where + ".bytes");
  t.alloc_op =
      static_cast<std::int32_t>(Signed(Field(v, "alloc_op", where), where + ".alloc_op", -1, last));
  t.free_op =
      static_cast<std::int32_t>(Signed(Field(v, "free_op", where), where + ".free_op", -1, last));
  t.uses = Indices(Field(v, "uses", where), where + ".uses", ops, "op", true);
  const json& swappable = Field(v, "swappable", where);
  if (!swappable.is_boolean()) Fail(where + ".swappable", "expected boolean");
  t.swappable = swappable.get<bool>();
  if (v.contains("pinned")) {  // optional: false when absent
    if (!v["pinned"].is_boolean()) Fail(where + ".pinned", "expected boolean");
    t.pinned = v["pinned"].get<bool>();
  }
  if (v.contains("device")) {  // optional: 0 (the only device) when absent
    t.device = static_cast<std::uint16_t>(
        Signed(v["device"], where + ".device", 0, std::numeric_limits<std::uint16_t>::max()));
  }
  return t;
}

}  // namespace

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kOptimizer:
      return "optimizer";
    case Phase::kUnknown:
      break;
  }
  return "unknown";
}

std::string ProfileToJson(const Profile& profile, int indent) {
  json doc = {{"format", kFormatName},
              {"format_version", profile.format_version},
              {"source", profile.source},
              {"iteration_s", profile.iteration_s},
              {"layers_hint", profile.layers_hint},
              {"ops", json::array()},
              {"tensors", json::array()}};
  json& ops = doc["ops"];
  for (const ProfileOp& op : profile.ops) {
    json entry = {
        {"token", op.token}, {"name", op.name},     {"phase", PhaseName(op.phase)},
        {"reads", op.reads}, {"writes", op.writes}, {"bytes_live_after", op.bytes_live_after}};
    if (op.device_s > 0) entry["device_s"] = op.device_s;
    ops.push_back(std::move(entry));
  }
  json& tensors = doc["tensors"];
  for (const ProfileTensor& t : profile.tensors) {
    tensors.push_back({{"external_id", t.external_id},
                       {"bytes", t.bytes},
                       {"alloc_op", t.alloc_op},
                       {"free_op", t.free_op},
                       {"uses", t.uses},
                       {"swappable", t.swappable}});
    if (t.device != 0) tensors.back()["device"] = t.device;
    if (t.pinned) tensors.back()["pinned"] = true;
  }
  // Op names come from untrusted traces: replace invalid UTF-8 rather than throw.
  return doc.dump(indent, ' ', false, json::error_handler_t::replace);
}

Profile ProfileFromJson(std::string_view text) {
  json doc;
  try {
    doc = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& e) {
    throw ProfileFormatError(std::string("invalid JSON: ") + e.what());
  }
  const json& format = Field(doc, "format", "$");
  if (format != kFormatName) Fail("$.format", std::string("expected \"") + kFormatName + "\"");
  Profile p;
  const std::uint64_t version = Unsigned(Field(doc, "format_version", "$"), "$.format_version");
  if (version != 1) Fail("$.format_version", "unsupported version " + std::to_string(version));
  const json& source = Field(doc, "source", "$");
  if (!source.is_string()) Fail("$.source", "expected string");
  p.source = source.get<std::string>();
  const json& iter = Field(doc, "iteration_s", "$");
  if (!iter.is_number() || iter.get<double>() < 0)
    Fail("$.iteration_s", "expected non-negative number");
  p.iteration_s = iter.get<double>();
  const std::uint64_t layers = Unsigned(Field(doc, "layers_hint", "$"), "$.layers_hint");
  if (layers > UINT32_MAX) Fail("$.layers_hint", "exceeds 32 bits");
  p.layers_hint = static_cast<std::uint32_t>(layers);
  const json& ops = Field(doc, "ops", "$");
  const json& tensors = Field(doc, "tensors", "$");
  if (!ops.is_array()) Fail("$.ops", "expected array");
  if (!tensors.is_array()) Fail("$.tensors", "expected array");
  if (ops.size() > INT32_MAX || tensors.size() > UINT32_MAX) Fail("$", "too many ops or tensors");
  for (std::size_t i = 0; i < ops.size(); ++i) {
    p.ops.push_back(ParseOp(ops[i], "$.ops[" + std::to_string(i) + "]", tensors.size()));
  }
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    p.tensors.push_back(
        ParseTensor(tensors[i], "$.tensors[" + std::to_string(i) + "]", ops.size()));
  }
  return p;
}

}  // namespace chameleon::policy
