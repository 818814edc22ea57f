#include "chameleon/trace/op_classes.h"

#include <algorithm>
#include <array>

namespace chameleon::trace {
namespace {

std::string_view StripAten(std::string_view name) {
  constexpr std::string_view kAten = "aten::";
  if (name.substr(0, kAten.size()) == kAten) name.remove_prefix(kAten.size());
  return name;
}

// Sorted, so lookup is a binary search. Views alias their input's storage; the wrappers in
// the wrappers (to, contiguous, item, dropout) only dispatch (to a copy_, clone or
// _local_scalar_dense child when there is work at all), so counting them would double their
// children or invent kernels.
constexpr std::array<std::string_view, 55> kMetadata = {"_reshape_alias",
                                                        "_unsafe_view",
                                                        "alias",
                                                        "alpha_dropout",
                                                        "as_strided",
                                                        "broadcast_to",
                                                        "chunk",
                                                        "contiguous",
                                                        "detach",
                                                        "detach_",
                                                        "diagonal",
                                                        "dim",
                                                        "dropout",
                                                        "empty",
                                                        "empty_like",
                                                        "empty_strided",
                                                        "expand",
                                                        "expand_as",
                                                        "feature_alpha_dropout",
                                                        "feature_dropout",
                                                        "flatten",
                                                        "is_nonzero",
                                                        "is_same_size",
                                                        "item",
                                                        "lift",
                                                        "lift_fresh",
                                                        "movedim",
                                                        "narrow",
                                                        "new_empty",
                                                        "new_empty_strided",
                                                        "numel",
                                                        "permute",
                                                        "record_stream",
                                                        "reshape",
                                                        "resize_",
                                                        "result_type",
                                                        "select",
                                                        "set_",
                                                        "size",
                                                        "slice",
                                                        "split",
                                                        "split_with_sizes",
                                                        "squeeze",
                                                        "squeeze_",
                                                        "stride",
                                                        "t",
                                                        "to",
                                                        "transpose",
                                                        "unbind",
                                                        "unflatten",
                                                        "unfold",
                                                        "unsqueeze",
                                                        "unsqueeze_",
                                                        "view",
                                                        "view_as"};

static_assert(std::is_sorted(kMetadata.begin(), kMetadata.end()));

constexpr std::array<std::string_view, 5> kAllocation = {"empty", "empty_like", "empty_strided",
                                                         "new_empty", "new_empty_strided"};

}  // namespace

bool IsMetadataOp(std::string_view name) {
  return std::binary_search(kMetadata.begin(), kMetadata.end(), StripAten(name));
}

bool IsAllocationOp(std::string_view name) {
  const std::string_view n = StripAten(name);
  return std::find(kAllocation.begin(), kAllocation.end(), n) != kAllocation.end();
}

bool IsCollectiveOp(std::string_view name) {
  return name.substr(0, 5) == "nccl:" || name.substr(0, 6) == "c10d::" ||
         name == "record_param_comms";
}

bool IsAnnotation(std::string_view name) {
  return name.substr(0, 1) == "[" || name.substr(0, 12) == "ProfilerStep" ||
         name.substr(0, 2) == "##";
}

}  // namespace chameleon::trace
