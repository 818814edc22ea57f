// Execution-trace JSON -> Trace. Both node layouts are accepted per node:
//   1.0.1:          "inputs": [v...], "input_types": [t...], "parent": P, "rf_id": R
//   1.0.3-chakra, 1.1.0-chakra:
//                   "inputs": {"values": [...], "types": [...]}, "ctrl_deps": P,
//                   "attrs": [{"name": "rf_id", "value": R}, ...]
// Attributes and fields this reader does not use (strides, exclusive/inclusive times, new attrs
// of later PyTorch releases) are ignored, so a newer minor schema still reads.
// Every field access is checked so a malformed file gives "file: node N: field: problem".
#include <algorithm>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "chameleon/trace/reader.h"

namespace chameleon::trace {
namespace {

using nlohmann::json;

// Collects the context of an error message while one node is parsed.
class NodeContext {
 public:
  NodeContext(const std::string& path, std::size_t index) : path_(path), index_(index) {}
  void set_id(std::int64_t id) {
    id_ = id;
    have_id_ = true;
  }

  [[noreturn]] void Fail(const std::string& field, const std::string& what) const {
    std::string node =
        have_id_ ? "node " + std::to_string(id_) : "node #" + std::to_string(index_) + " (no id)";
    throw TraceError(path_ + ": " + node + ": " + field + ": " + what);
  }

 private:
  const std::string& path_;
  std::size_t index_;
  std::int64_t id_ = 0;
  bool have_id_ = false;
};

const json& Require(const json& obj, const char* key, const NodeContext& ctx) {
  auto it = obj.find(key);
  if (it == obj.end()) ctx.Fail(key, "missing");
  return *it;
}

std::int64_t AsInt(const json& v, const std::string& field, const NodeContext& ctx) {
  if (!v.is_number_integer())
    ctx.Fail(field, "expected integer, got " + std::string(v.type_name()));
  return v.get<std::int64_t>();
}

std::uint64_t AsCount(const json& v, const std::string& field, const NodeContext& ctx) {
  const std::int64_t x = AsInt(v, field, ctx);
  if (x < 0) ctx.Fail(field, "negative value " + std::to_string(x));
  return static_cast<std::uint64_t>(x);
}

// Parses `[tensor_id, storage_id, offset, numel, elem_size, device]`. Returns false for the
// uninitialised-tensor placeholder (device ""), which stands for "no tensor".
bool ParseTensor(const json& v, const std::string& field, const NodeContext& ctx, TensorRef* out) {
  if (!v.is_array() || v.size() != 6 || !v[5].is_string()) {
    ctx.Fail(field, "expected [tensor_id, storage_id, offset, numel, elem_size, device]");
  }
  const std::string& device = v[5].get_ref<const std::string&>();
  if (device.empty()) return false;
  out->tensor_id = AsCount(v[0], field + ".tensor_id", ctx);
  out->storage_id = AsCount(v[1], field + ".storage_id", ctx);
  out->offset = AsCount(v[2], field + ".offset", ctx);
  out->numel = AsCount(v[3], field + ".numel", ctx);
  const std::uint64_t elem = AsCount(v[4], field + ".elem_size", ctx);
  if (elem > 64) ctx.Fail(field + ".elem_size", "implausible element size " + std::to_string(elem));
  out->elem_size = static_cast<std::uint32_t>(elem);
  out->cuda = device.rfind("cuda", 0) == 0;
  // Storage id 0 is what ET writes when a tensor has no storage; a real tensor pointing there
  // would be attributed to nothing (a dangling storage reference).
  if (out->storage_id == 0 && out->numel > 0)
    ctx.Fail(field + ".storage_id", "dangling storage id 0");
  return true;
}

// Appends the tensors of one value list, given its parallel type list.
void ParseValues(const json& values, const json& types, const std::string& field,
                 const NodeContext& ctx, std::vector<TensorRef>* out) {
  if (!values.is_array()) ctx.Fail(field, "expected array, got " + std::string(values.type_name()));
  if (!types.is_array()) ctx.Fail(field + " types", "expected array");
  if (types.size() != values.size()) ctx.Fail(field, "values and types differ in length");
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (!types[i].is_string())
      ctx.Fail(field + " types[" + std::to_string(i) + "]", "expected string");
    const std::string& type = types[i].get_ref<const std::string&>();
    const std::string item = field + "[" + std::to_string(i) + "]";
    TensorRef t;
    if (type.rfind("Tensor(", 0) == 0) {
      if (ParseTensor(values[i], item, ctx, &t)) out->push_back(t);
    } else if (type.rfind("GenericList[Tensor", 0) == 0) {
      if (!values[i].is_array()) ctx.Fail(item, "expected list of tensors");
      for (std::size_t j = 0; j < values[i].size(); ++j) {
        if (ParseTensor(values[i][j], item + "[" + std::to_string(j) + "]", ctx, &t))
          out->push_back(t);
      }
    }
  }
}

void ParseIo(const json& node, bool is_input, const NodeContext& ctx, TraceNode* out) {
  const char* key = is_input ? "inputs" : "outputs";
  const json& io = Require(node, key, ctx);
  std::vector<TensorRef>* dst = is_input ? &out->inputs : &out->outputs;
  if (io.is_object()) {  // 1.0.3: {values, shapes, types}
    ParseValues(Require(io, "values", ctx), Require(io, "types", ctx), std::string(key) + ".values",
                ctx, dst);
  } else {  // 1.0.1: flat list + separate *_types
    ParseValues(io, Require(node, is_input ? "input_types" : "output_types", ctx), key, ctx, dst);
  }
}

// rf_id and tid live at top level in 1.0.1 and in `attrs` in 1.0.3.
void ParseAttrs(const json& node, const NodeContext& ctx, TraceNode* out) {
  auto attrs = node.find("attrs");
  if (attrs != node.end()) {
    if (!attrs->is_array()) ctx.Fail("attrs", "expected array");
    for (const json& a : *attrs) {
      if (!a.is_object()) ctx.Fail("attrs", "expected objects");
      auto name = a.find("name");
      auto value = a.find("value");
      if (name == a.end() || !name->is_string() || value == a.end()) continue;
      if (*name == "rf_id") out->rf_id = AsInt(*value, "attrs.rf_id", ctx);
      if (*name == "tid") out->tid = AsCount(*value, "attrs.tid", ctx);
    }
  }
  if (auto rf = node.find("rf_id"); rf != node.end()) out->rf_id = AsInt(*rf, "rf_id", ctx);
  if (auto tid = node.find("tid"); tid != node.end()) out->tid = AsCount(*tid, "tid", ctx);
}

TraceNode ParseNode(const json& node, const NodeContext& ctx_in) {
  NodeContext ctx = ctx_in;
  if (!node.is_object()) ctx.Fail("node", "expected object");
  TraceNode out;
  out.id = AsInt(Require(node, "id", ctx), "id", ctx);
  ctx.set_id(out.id);
  const json& name = Require(node, "name", ctx);
  if (!name.is_string()) ctx.Fail("name", "expected string, got " + std::string(name.type_name()));
  out.name = name.get<std::string>();
  if (auto p = node.find("parent"); p != node.end()) {
    out.parent_id = AsInt(*p, "parent", ctx);
  } else {
    out.parent_id = AsInt(Require(node, "ctrl_deps", ctx), "ctrl_deps", ctx);
  }
  ParseAttrs(node, ctx, &out);
  ParseIo(node, true, ctx, &out);
  ParseIo(node, false, ctx, &out);
  return out;
}

// The profiler's own process and thread nodes: "[pytorch|profiler|execution_trace|thread]" and,
// as older PyTorch releases name them, "[pytorch|profiler|execution_graph|thread]". PyTorch
// writes the thread node's `parent` as the process node's id even when the process node is not
// in the file (a trace cut from a longer one), so such a node is a root, not an error.
bool IsRootName(const std::string& name) { return name.rfind("[pytorch|profiler|", 0) == 0; }

// Schemas whose node layout is the one above: 1.0.x and 1.1.x, with or without a "-chakra..."
// suffix. A trace without a schema field is read as well (old tools omit it); another major or
// minor version is refused, since its fields may mean something else.
void CheckSchema(const std::string& schema, const std::string& path) {
  if (schema.empty() || schema.rfind("1.0.", 0) == 0 || schema.rfind("1.1.", 0) == 0) return;
  throw TraceError(path + ": schema: unsupported version '" + schema +
                   "' (this reader knows 1.0.x and 1.1.x execution traces)");
}

// Sorts by id and resolves parent ids to indices. Roots (the ET process/thread nodes) may
// point at themselves or at nothing; any other node's parent must exist.
void LinkTree(Trace* trace) {
  auto& nodes = trace->nodes;
  std::sort(nodes.begin(), nodes.end(),
            [](const TraceNode& a, const TraceNode& b) { return a.id < b.id; });
  std::unordered_map<std::int64_t, std::uint32_t> index;
  index.reserve(nodes.size());
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    if (!index.emplace(nodes[i].id, i).second) {
      throw TraceError(trace->path + ": node " + std::to_string(nodes[i].id) + ": id: duplicate");
    }
  }
  for (std::uint32_t i = 0; i < nodes.size(); ++i) {
    TraceNode& n = nodes[i];
    auto it = index.find(n.parent_id);
    if (it == index.end() || it->second == i) {
      if (IsRootName(n.name) || n.parent_id == 0) continue;
      throw TraceError(trace->path + ": node " + std::to_string(n.id) +
                       ": parent: no node with id " + std::to_string(n.parent_id));
    }
    n.parent = static_cast<std::int32_t>(it->second);
    nodes[it->second].children.push_back(i);
  }
}

}  // namespace

Trace ParseTrace(std::string_view json_text, const std::string& path) {
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    throw TraceError(path + ": invalid JSON: " + e.what());
  }
  Trace trace;
  trace.path = path;
  if (!doc.is_object()) throw TraceError(path + ": top level: expected object");
  if (auto s = doc.find("schema"); s != doc.end() && s->is_string())
    trace.schema = s->get<std::string>();
  CheckSchema(trace.schema, path);
  auto nodes = doc.find("nodes");
  if (nodes == doc.end() || !nodes->is_array())
    throw TraceError(path + ": nodes: missing or not an array");
  trace.nodes.reserve(nodes->size());
  for (std::size_t i = 0; i < nodes->size(); ++i) {
    trace.nodes.push_back(ParseNode((*nodes)[i], NodeContext(path, i)));
  }
  LinkTree(&trace);
  return trace;
}

}  // namespace chameleon::trace
