#include "chameleon/trace/kineto.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "chameleon/trace/reader.h"

namespace chameleon::trace {
namespace {

using nlohmann::json;

struct CpuOp {
  double ts, end;
  std::int64_t rf_id;
  const std::string* name;
};

struct Launch {
  double ts;
  std::uint64_t tid;
};

struct DeviceEvent {
  std::int64_t correlation;
  double dur_us;
  const json* name;  // may be null
};

// Kineto writes pid/tid as numbers or strings ("Spans"); only numeric threads can launch.
std::uint64_t ThreadKey(const json& e) {
  auto pid = e.find("pid");
  auto tid = e.find("tid");
  const std::uint64_t p =
      pid != e.end() && pid->is_number_integer() ? pid->get<std::uint64_t>() : 0;
  const std::uint64_t t =
      tid != e.end() && tid->is_number_integer() ? tid->get<std::uint64_t>() : 0;
  return p * 1000003u ^ t;
}

class KinetoParser {
 public:
  explicit KinetoParser(const std::string& path) : path_(path) {}

  void Parse(const json& doc) {
    auto events = doc.find("traceEvents");
    if (!doc.is_object() || events == doc.end() || !events->is_array()) {
      throw TraceError(path_ + ": traceEvents: missing or not an array");
    }
    for (std::size_t i = 0; i < events->size(); ++i) Event((*events)[i], i);
  }

  std::unordered_map<std::uint64_t, std::vector<CpuOp>> cpu_ops;  // by thread
  std::unordered_map<std::int64_t, Launch> launches;              // by correlation id
  std::vector<DeviceEvent> device;
  std::size_t kernels = 0;

 private:
  [[noreturn]] void Fail(std::size_t i, const std::string& field, const std::string& what) const {
    throw TraceError(path_ + ": traceEvents[" + std::to_string(i) + "]: " + field + ": " + what);
  }

  double Number(const json& e, const char* key, std::size_t i) const {
    auto it = e.find(key);
    if (it == e.end() || !it->is_number()) Fail(i, key, "missing or not a number");
    return it->get<double>();
  }

  std::int64_t IntArg(const json& args, const char* key, std::size_t i) const {
    auto it = args.find(key);
    if (it == args.end() || !it->is_number_integer())
      Fail(i, std::string("args.") + key, "missing or not an integer");
    return it->get<std::int64_t>();
  }

  void Event(const json& e, std::size_t i) {
    if (!e.is_object()) Fail(i, "event", "expected object");
    auto cat_it = e.find("cat");
    if (cat_it == e.end() || !cat_it->is_string()) return;  // metadata events
    const std::string& cat = cat_it->get_ref<const std::string&>();
    auto ph = e.find("ph");
    if (ph == e.end() || *ph != "X") return;  // flows repeat the correlation id we already read
    const bool is_device = cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset";
    if (cat != "cpu_op" && cat != "cuda_runtime" && cat != "cuda_driver" && !is_device) return;
    auto args = e.find("args");
    if (args == e.end() || !args->is_object()) Fail(i, "args", "missing or not an object");
    const double ts = Number(e, "ts", i);
    if (cat == "cpu_op") {
      auto name = e.find("name");
      if (name == e.end() || !name->is_string()) Fail(i, "name", "missing or not a string");
      const bool has_rf = args->contains("Record function id");
      const std::int64_t rf =
          has_rf ? IntArg(*args, "Record function id", i) : IntArg(*args, "Ev Idx", i) - 1;
      cpu_ops[ThreadKey(e)].push_back(
          CpuOp{ts, ts + Number(e, "dur", i), rf, &name->get_ref<const std::string&>()});
    } else if (is_device) {
      auto name = e.find("name");
      device.push_back(DeviceEvent{IntArg(*args, "correlation", i), Number(e, "dur", i),
                                   name != e.end() && name->is_string() ? &*name : nullptr});
      kernels += cat == "kernel";
    } else if (args->contains("correlation")) {
      launches[IntArg(*args, "correlation", i)] = Launch{ts, ThreadKey(e)};
    }
  }

  const std::string& path_;
};

// Innermost cpu_op containing `ts` on one thread: the latest-starting op that still covers ts.
// Ops are sorted by start; nesting means the covering ops form a chain, so a backwards scan
// from the last op starting at or before ts finds it quickly in practice.
const CpuOp* Innermost(const std::vector<CpuOp>& ops, double ts) {
  auto it = std::upper_bound(ops.begin(), ops.end(), ts,
                             [](double t, const CpuOp& op) { return t < op.ts; });
  while (it != ops.begin()) {
    --it;
    if (it->end >= ts) return &*it;
  }
  return nullptr;
}

// The workload op a node's device work belongs to (see kineto.h).
std::int64_t OpFor(const Trace& trace, std::uint32_t node,
                   const std::vector<std::int64_t>& op_of_node) {
  if (op_of_node[node] >= 0) return op_of_node[node];
  std::vector<std::uint32_t> stack(trace.nodes[node].children.rbegin(),
                                   trace.nodes[node].children.rend());
  while (!stack.empty()) {  // pre-order: the first device-work descendant in id order
    const std::uint32_t c = stack.back();
    stack.pop_back();
    if (op_of_node[c] >= 0) return op_of_node[c];
    stack.insert(stack.end(), trace.nodes[c].children.rbegin(), trace.nodes[c].children.rend());
  }
  for (std::int32_t a = trace.nodes[node].parent; a >= 0; a = trace.nodes[a].parent) {
    if (op_of_node[a] >= 0) return op_of_node[a];
  }
  return -1;
}

}  // namespace

KinetoJoinStats JoinKineto(const Trace& trace, const std::string& kineto_path, Workload* w) {
  const std::string text = ReadMaybeGzip(kineto_path);
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error& e) {
    throw TraceError(kineto_path + ": invalid JSON: " + e.what());
  }
  KinetoParser k(kineto_path);
  k.Parse(doc);

  std::unordered_map<std::int64_t, std::uint32_t> node_of_rf;
  for (std::uint32_t i = 0; i < trace.nodes.size(); ++i) {
    if (trace.nodes[i].rf_id >= 0) node_of_rf.emplace(trace.nodes[i].rf_id, i);
  }
  std::vector<std::int64_t> op_of_node(trace.nodes.size(), -1);
  for (std::size_t o = 0; o < w->ops.size(); ++o)
    op_of_node[w->ops[o].node] = static_cast<std::int64_t>(o);

  KinetoJoinStats stats;
  for (auto& [tid, ops] : k.cpu_ops) {
    std::sort(ops.begin(), ops.end(), [](const CpuOp& a, const CpuOp& b) {
      return a.ts < b.ts || (a.ts == b.ts && a.end > b.end);
    });
    for (const CpuOp& op : ops) {
      ++stats.cpu_ops;
      auto n = node_of_rf.find(op.rf_id);
      if (n == node_of_rf.end())
        ++stats.rf_id_missing;
      else if (trace.nodes[n->second].name == *op.name)
        ++stats.rf_id_name_match;
      else
        ++stats.rf_id_name_mismatch;
    }
  }
  std::vector<double> dur_us(w->ops.size(), -1), longest_us(w->ops.size(), -1);
  for (const DeviceEvent& d : k.device) {
    ++stats.device_events;
    auto launch = k.launches.find(d.correlation);
    if (launch == k.launches.end()) {
      ++stats.no_launch;
      continue;
    }
    auto thread = k.cpu_ops.find(launch->second.tid);
    const CpuOp* cpu =
        thread == k.cpu_ops.end() ? nullptr : Innermost(thread->second, launch->second.ts);
    if (cpu == nullptr) {
      ++stats.no_cpu_op;
      continue;
    }
    auto node = node_of_rf.find(cpu->rf_id);
    if (node == node_of_rf.end()) {
      ++stats.no_node;
      continue;
    }
    const std::int64_t op = OpFor(trace, node->second, op_of_node);
    if (op < 0) {
      ++stats.no_op;
      continue;
    }
    ++stats.joined;
    dur_us[op] = std::max(dur_us[op], 0.0) + d.dur_us;
    if (d.name != nullptr && d.dur_us > longest_us[op]) {
      longest_us[op] = d.dur_us;
      w->ops[op].device_name = d.name->get<std::string>();
    }
  }
  stats.kernels = k.kernels;
  for (std::size_t o = 0; o < w->ops.size(); ++o) {
    if (dur_us[o] < 0) continue;
    w->ops[o].duration_ns = std::llround(dur_us[o] * 1000.0);
    ++stats.ops_with_duration;
  }
  return stats;
}

}  // namespace chameleon::trace
