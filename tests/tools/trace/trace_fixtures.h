// Builders for small synthetic execution traces in either schema, for the reader tests.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chameleon::trace::testing {

using nlohmann::json;

/// A tensor value [tensor_id, storage_id, offset, numel, elem_size, device].
inline json Tensor(std::uint64_t tensor_id, std::uint64_t storage_id, std::uint64_t numel,
                   std::uint64_t elem = 4, const char* device = "cuda:0",
                   std::uint64_t offset = 0) {
  return json::array({tensor_id, storage_id, offset, numel, elem, device});
}

/// One node, schema-neutral. Non-tensor values can be mixed in (they get type "Int").
struct FakeNode {
  std::int64_t id;
  std::int64_t parent;
  std::string name;
  std::vector<json> inputs = {};
  std::vector<json> outputs = {};
};

inline std::vector<std::string> TypesOf(const std::vector<json>& values) {
  std::vector<std::string> types;
  for (const json& v : values)
    types.push_back(v.is_array() && v.size() == 6 ? "Tensor(float)" : "Int");
  return types;
}

/// Schema 1.0.1: flat lists, separate *_types, top-level parent and rf_id.
inline json Node101(const FakeNode& n) {
  return {{"name", n.name},
          {"id", n.id},
          {"rf_id", n.id},
          {"parent", n.parent},
          {"tid", 1},
          {"inputs", n.inputs},
          {"input_types", TypesOf(n.inputs)},
          {"input_shapes", json::array()},
          {"outputs", n.outputs},
          {"output_types", TypesOf(n.outputs)},
          {"output_shapes", json::array()}};
}

/// Schema 1.0.3-chakra: {values, shapes, types} objects, ctrl_deps, rf_id in attrs.
inline json Node103(const FakeNode& n) {
  return {
      {"id", n.id},
      {"name", n.name},
      {"ctrl_deps", n.parent},
      {"inputs", {{"values", n.inputs}, {"shapes", json::array()}, {"types", TypesOf(n.inputs)}}},
      {"outputs",
       {{"values", n.outputs}, {"shapes", json::array()}, {"types", TypesOf(n.outputs)}}},
      {"attrs", json::array({{{"name", "rf_id"}, {"type", "uint64"}, {"value", n.id}},
                             {{"name", "tid"}, {"type", "uint64"}, {"value", 1}}})}};
}

/// A whole document; nodes are emitted in the given order (real traces are not id-sorted).
inline std::string Document(const std::vector<FakeNode>& nodes, bool chakra = false) {
  json doc = {
      {"schema", chakra ? "1.0.3-chakra.0.0.4" : "1.0.1"}, {"pid", 1}, {"nodes", json::array()}};
  doc["nodes"].push_back(chakra ? Node103({1, 1, "[pytorch|profiler|execution_trace|process]"})
                                : Node101({1, 1, "[pytorch|profiler|execution_trace|process]"}));
  for (const FakeNode& n : nodes) doc["nodes"].push_back(chakra ? Node103(n) : Node101(n));
  return doc.dump();
}

}  // namespace chameleon::trace::testing
