// Typed, range-checked reads of YAML scalars for config_file.cc. Every problem becomes one error
// line "<origin>: <key path>: expected <what>, got <value>"; a key that is absent leaves the
// output untouched. yaml-cpp's own as<T>() is not used: it accepts "1.9" for an int in some
// versions and its exceptions do not name the key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace chameleon::daemon::detail {

/// Not thread-safe; one per parse.
class ConfigReader {
 public:
  ConfigReader(std::string origin, std::vector<std::string>* errors)
      : origin_(std::move(origin)), errors_(errors) {}

  void Error(const std::string& path, const std::string& problem);

  /// `node` must be a map whose keys are all in `known`. Returns false (after reporting) when it
  /// is not a map; unknown keys are reported but the known ones are still read.
  bool CheckMap(const YAML::Node& node, const std::string& path,
                std::initializer_list<const char*> known);

  // Each reader looks up parent[key]; absent: no change, wrong type or range: error, no change.
  void Unsigned(const YAML::Node& parent, const std::string& path, const char* key,
                std::uint64_t min, std::uint64_t max, std::uint64_t* out);
  void Unsigned32(const YAML::Node& parent, const std::string& path, const char* key,
                  std::uint32_t min, std::uint32_t max, std::uint32_t* out);
  void Int(const YAML::Node& parent, const std::string& path, const char* key, int min, int max,
           int* out);
  /// Inclusive range unless `exclusive_min` (for "must be > 0" values).
  void Double(const YAML::Node& parent, const std::string& path, const char* key, double min,
              double max, double* out, bool exclusive_min = false);
  void Bool(const YAML::Node& parent, const std::string& path, const char* key, bool* out);
  void String(const YAML::Node& parent, const std::string& path, const char* key, std::string* out);
  /// Octal permission bits ("0660", 0660 and 660 all mean rw-rw----), at most 0777.
  void Mode(const YAML::Node& parent, const std::string& path, const char* key, std::uint32_t* out);
  /// A byte count: an integer or a number with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB).
  void Bytes(const YAML::Node& parent, const std::string& path, const char* key, std::uint64_t min,
             std::uint64_t* out);
  /// Milliseconds in the file, nanoseconds in the options.
  void MillisToNanos(const YAML::Node& parent, const std::string& path, const char* key,
                     std::uint64_t min_ms, std::uint64_t max_ms, std::uint64_t* out_ns);
  void StringList(const YAML::Node& parent, const std::string& path, const char* key,
                  std::vector<std::string>* out);

  static std::string Join(const std::string& path, const std::string& key);
  /// How a node is shown in an error: the scalar quoted, or its kind ("a map", "null").
  static std::string Describe(const YAML::Node& node);

 private:
  /// The scalar text of parent[key], or nullptr when absent (reported when not a scalar).
  const std::string* Scalar(const YAML::Node& node, const std::string& path, const char* what);

  std::string origin_;
  std::vector<std::string>* errors_;
};

/// Parses a byte count as Bytes() does (chameleon/ipc/byte_size.h); false when it is not one.
bool ParseByteCount(const std::string& text, std::uint64_t* out);

}  // namespace chameleon::daemon::detail
