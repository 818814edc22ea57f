// The in-memory form of a PyTorch execution trace (ET), independent of its JSON schema
// (1.0.1 flat lists or 1.0.3-chakra objects). Only what replay and profiling need is kept:
// the op tree, names, rf_id and the tensors each op reads and writes.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace chameleon::trace {

/// A malformed or unreadable trace. what() names the file, the node id and the field, e.g.
/// "t.json.gz: node 42: inputs[0]: expected [tensor_id, storage_id, offset, numel, elem_size,
/// device]".
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// One tensor value: `[tensor_id, storage_id, offset, numel, elem_size, device]`.
struct TensorRef {
  std::uint64_t tensor_id = 0;
  std::uint64_t storage_id = 0;
  std::uint64_t offset = 0;  ///< storage offset, in elements
  std::uint64_t numel = 0;
  std::uint32_t elem_size = 0;
  bool cuda = false;  ///< device string starts with "cuda"

  /// Bytes of the storage this view reaches: (offset + numel) * elem_size.
  std::uint64_t Extent() const { return (offset + numel) * elem_size; }
};

/// One ET node (an op, a record_function range or a thread/process root).
struct TraceNode {
  std::int64_t id = 0;
  std::int64_t parent_id = 0;  ///< `parent` (1.0.1) or `ctrl_deps` (1.0.3)
  std::int64_t rf_id = -1;     ///< record-function id (joins Kineto), -1 when absent
  std::uint64_t tid = 0;
  std::string name;
  std::vector<TensorRef> inputs;  ///< tensors, including those inside tensor lists
  std::vector<TensorRef> outputs;
  std::int32_t parent = -1;             ///< index of the parent in Trace::nodes, -1 for roots
  std::vector<std::uint32_t> children;  ///< indices in Trace::nodes, ascending id
};

/// A whole trace. Nodes are sorted by id, which is the order in which ops were entered
/// (ids come from one counter shared by all threads), so parents precede their children.
/// Value type; not thread-safe for concurrent mutation.
struct Trace {
  std::string path;    ///< for error messages
  std::string schema;  ///< e.g. "1.0.1", "1.0.3-chakra.0.0.4"
  std::vector<TraceNode> nodes;
};

}  // namespace chameleon::trace
