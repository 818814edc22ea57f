#include "config_reader.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::daemon::detail {

namespace {

// Full-match parse: trailing garbage ("12abc", "1.5" for an integer) is a failure.
template <typename T>
bool ParseNumber(const std::string& text, T* out) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, *out);
  return ec == std::errc() && ptr == end;
}

bool ParseDouble(const std::string& text, double* out) {
  const char* begin = text.data();
  if (!text.empty() && text.front() == '+') ++begin;  // YAML allows "+1.5"
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(begin, end, *out, std::chars_format::general);
  return ec == std::errc() && ptr == end && std::isfinite(*out);
}

std::string Range(const std::string& min, const std::string& max) {
  return "[" + min + ", " + max + "]";
}

std::string FormatDouble(double v) {
  char buf[32];
  const auto [ptr, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  return ec == std::errc() ? std::string(buf, ptr) : "?";
}

}  // namespace

void ConfigReader::Error(const std::string& path, const std::string& problem) {
  errors_->push_back(origin_ + ": " + path + ": " + problem);
}

std::string ConfigReader::Join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

std::string ConfigReader::Describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Null:
      return "nothing (null)";
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

bool ConfigReader::CheckMap(const YAML::Node& node, const std::string& path,
                            std::initializer_list<const char*> known) {
  if (!node.IsMap()) {
    Error(path.empty() ? "(top level)" : path, "expected a map, got " + Describe(node));
    return false;
  }
  for (const auto& entry : node) {
    if (!entry.first.IsScalar()) {
      Error(path.empty() ? "(top level)" : path,
            "keys must be plain names, got " + Describe(entry.first));
      continue;
    }
    const std::string& key = entry.first.Scalar();
    const bool ok =
        std::any_of(known.begin(), known.end(), [&](const char* k) { return key == k; });
    if (ok) continue;
    std::string names;
    for (const char* k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    Error(Join(path, key), "unknown key (expected one of: " + names + ")");
  }
  return true;
}

const std::string* ConfigReader::Scalar(const YAML::Node& node, const std::string& path,
                                        const char* what) {
  if (!node.IsDefined()) return nullptr;
  if (node.IsScalar()) return &node.Scalar();
  Error(path, std::string("expected ") + what + ", got " + Describe(node));
  return nullptr;
}

void ConfigReader::Unsigned(const YAML::Node& parent, const std::string& path, const char* key,
                            std::uint64_t min, std::uint64_t max, std::uint64_t* out) {
  const std::string full = Join(path, key);
  const std::string expected = "an integer in " + Range(std::to_string(min), std::to_string(max));
  const std::string* text = Scalar(parent[key], full, expected.c_str());
  if (text == nullptr) return;
  std::uint64_t v = 0;
  if (!ParseNumber(*text, &v) || v < min || v > max) {
    Error(full, "expected " + expected + ", got '" + *text + "'");
    return;
  }
  *out = v;
}

void ConfigReader::Unsigned32(const YAML::Node& parent, const std::string& path, const char* key,
                              std::uint32_t min, std::uint32_t max, std::uint32_t* out) {
  std::uint64_t v = *out;
  Unsigned(parent, path, key, min, max, &v);
  *out = static_cast<std::uint32_t>(v);
}

void ConfigReader::Int(const YAML::Node& parent, const std::string& path, const char* key, int min,
                       int max, int* out) {
  const std::string full = Join(path, key);
  const std::string expected = "an integer in " + Range(std::to_string(min), std::to_string(max));
  const std::string* text = Scalar(parent[key], full, expected.c_str());
  if (text == nullptr) return;
  int v = 0;
  if (!ParseNumber(*text, &v) || v < min || v > max) {
    Error(full, "expected " + expected + ", got '" + *text + "'");
    return;
  }
  *out = v;
}

void ConfigReader::Double(const YAML::Node& parent, const std::string& path, const char* key,
                          double min, double max, double* out, bool exclusive_min) {
  const std::string full = Join(path, key);
  const std::string expected = "a number in " + std::string(exclusive_min ? "(" : "[") +
                               FormatDouble(min) + ", " + FormatDouble(max) + "]";
  const std::string* text = Scalar(parent[key], full, expected.c_str());
  if (text == nullptr) return;
  double v = 0;
  const bool in_range = ParseDouble(*text, &v) && (exclusive_min ? v > min : v >= min) && v <= max;
  if (!in_range) {
    Error(full, "expected " + expected + ", got '" + *text + "'");
    return;
  }
  *out = v;
}

void ConfigReader::Bool(const YAML::Node& parent, const std::string& path, const char* key,
                        bool* out) {
  const std::string full = Join(path, key);
  const std::string* text = Scalar(parent[key], full, "true or false");
  if (text == nullptr) return;
  static constexpr const char* kTrue[] = {"true", "True", "TRUE", "yes", "Yes", "on", "On"};
  static constexpr const char* kFalse[] = {"false", "False", "FALSE", "no", "No", "off", "Off"};
  auto in = [&](const auto& list) {
    return std::any_of(std::begin(list), std::end(list), [&](const char* s) { return *text == s; });
  };
  if (in(kTrue)) {
    *out = true;
  } else if (in(kFalse)) {
    *out = false;
  } else {
    Error(full, "expected true or false, got '" + *text + "'");
  }
}

void ConfigReader::String(const YAML::Node& parent, const std::string& path, const char* key,
                          std::string* out) {
  const std::string* text = Scalar(parent[key], Join(path, key), "a string");
  if (text != nullptr) *out = *text;
}

void ConfigReader::Mode(const YAML::Node& parent, const std::string& path, const char* key,
                        std::uint32_t* out) {
  const std::string full = Join(path, key);
  static constexpr const char* kExpected = "octal permission bits in [0, 0777] such as \"0660\"";
  const std::string* text = Scalar(parent[key], full, kExpected);
  if (text == nullptr) return;
  std::string digits = *text;
  if (digits.rfind("0o", 0) == 0) digits = digits.substr(2);  // YAML 1.2 spelling
  std::uint32_t v = 0;
  const char* end = digits.data() + digits.size();
  const auto [ptr, ec] = std::from_chars(digits.data(), end, v, 8);
  if (digits.empty() || ec != std::errc() || ptr != end || v > 0777) {
    Error(full, std::string("expected ") + kExpected + ", got '" + *text + "'");
    return;
  }
  *out = v;
}

bool ParseByteCount(const std::string& text, std::uint64_t* out) {
  const ipc::ByteSize size = ipc::ParseByteSize(text);
  if (!size) return false;
  *out = size.bytes;
  return true;
}

void ConfigReader::Bytes(const YAML::Node& parent, const std::string& path, const char* key,
                         std::uint64_t min, std::uint64_t* out) {
  const std::string full = Join(path, key);
  const std::string expected =
      "a byte size >= " + std::to_string(min) + " (" + ipc::kByteSizeForms + ")";
  const std::string* text = Scalar(parent[key], full, expected.c_str());
  if (text == nullptr) return;
  const ipc::ByteSize size = ipc::ParseByteSize(*text);
  if (!size || size.bytes < min) {
    const std::string why = size ? "" : std::string(" (") + size.error + ")";
    Error(full, "expected " + expected + ", got '" + *text + "'" + why);
    return;
  }
  *out = size.bytes;
}

void ConfigReader::MillisToNanos(const YAML::Node& parent, const std::string& path, const char* key,
                                 std::uint64_t min_ms, std::uint64_t max_ms,
                                 std::uint64_t* out_ns) {
  std::uint64_t ms = *out_ns / 1'000'000;
  const std::size_t before = errors_->size();
  Unsigned(parent, path, key, min_ms, max_ms, &ms);
  if (errors_->size() == before && parent[key].IsDefined()) *out_ns = ms * 1'000'000;
}

void ConfigReader::StringList(const YAML::Node& parent, const std::string& path, const char* key,
                              std::vector<std::string>* out) {
  const std::string full = Join(path, key);
  const YAML::Node node = parent[key];
  if (!node.IsDefined()) return;
  if (!node.IsSequence()) {
    Error(full, "expected a list of non-empty strings, got " + Describe(node));
    return;
  }
  std::vector<std::string> values;
  bool ok = true;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar() || node[i].Scalar().empty()) {
      Error(full + "[" + std::to_string(i) + "]",
            "expected a non-empty string, got " + Describe(node[i]));
      ok = false;
      continue;
    }
    values.push_back(node[i].Scalar());
  }
  if (ok) *out = std::move(values);
}

}  // namespace chameleon::daemon::detail
