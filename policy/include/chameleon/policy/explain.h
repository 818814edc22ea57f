// Explanations of a plan: a table for chameleonctl, a CSV dump and a before/after memory
// timeline (SVG, or a gnuplot script that renders a PNG). Writes to a caller's std::ostream;
// the library itself opens no file (see policy_files.h for the path-taking helper).
#pragma once

#include <ostream>
#include <string>

#include "chameleon/policy/generator.h"
#include "chameleon/policy/profile.h"

namespace chameleon::policy {

/// A fixed-width table, one row per swap, with the summary on top.
void WritePlanTable(const Plan& plan, const Profile& profile, std::ostream& out);

/// CSV with a header line: tensor,external_id,bytes,out_op,out_token,out_occurrence,free_from_op,
/// in_op,in_token,in_occurrence,use_op,use_token,use_occurrence,transfer_s,stall_s,score,tier
void WritePlanCsv(const Plan& plan, const Profile& profile, std::ostream& out);

/// A self-contained SVG: memory per op before (grey) and after (blue) the plan, the limit (red).
/// Long iterations are down-sampled to at most 2000 points (max per bucket, so peaks survive).
void WriteMemoryTimelineSvg(const Plan& plan, std::ostream& out);

/// A gnuplot script with inline data that writes `png_path` when run with `gnuplot`.
void WriteMemoryTimelineGnuplot(const Plan& plan, const std::string& png_path, std::ostream& out);

}  // namespace chameleon::policy
