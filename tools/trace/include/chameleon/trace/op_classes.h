// How trace op names are classified (documented in docs/replay.md).
#pragma once

#include <string_view>

namespace chameleon::trace {

/// True for ops that never launch device work by themselves: views and metadata (`view`,
/// `as_strided`, `reshape`, `t`, `transpose`, `expand`, `slice`, `detach`, ...), pure
/// allocations (`empty*`: they create a storage but write nothing) and dispatch wrappers whose
/// device work, if any, is done by a child (`to`, `contiguous`, `item`, ...). Accepts names with
/// or without the `aten::` prefix.
bool IsMetadataOp(std::string_view name);

/// True for pure allocation ops (`empty`, `empty_like`, `empty_strided`, `new_empty*`).
bool IsAllocationOp(std::string_view name);

/// True for collectives: `nccl:*`, `c10d::*`, `record_param_comms`.
bool IsCollectiveOp(std::string_view name);

/// True for annotation ranges that are not ops: ET roots, `ProfilerStep#N`, `## ... ##`.
bool IsAnnotation(std::string_view name);

}  // namespace chameleon::trace
