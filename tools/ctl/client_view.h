// chameleonctl client ID: the text view of one client's description (the daemon's JSON).
#pragma once

#include <ostream>

#include <nlohmann/json.hpp>

namespace chameleon::ctl {

/// Prints the client: its summary as key/value lines, then the swap executor's counters as a
/// table (total and last iteration), the policy in force with its predicted vs measured iteration
/// time, and the candidate policies. Fields the daemon did not send print as "-".
void PrintClient(std::ostream& out, const nlohmann::json& client);

}  // namespace chameleon::ctl
