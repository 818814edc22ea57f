// ClientSession::OptionsChanged: what a live options update (a SIGHUP reload) changes in a client
// that is already connected. Everything else the session reads from the daemon's options each
// time it needs it (drain batch, timeouts, history bound, device limits), so it follows the new
// values without help.
#include <fnmatch.h>

#include <algorithm>
#include <limits>

#include "chameleon/daemon/client_session.h"

namespace chameleon::daemon {

void ClientSession::OptionsChanged() {
  // Thresholds at the next iteration: the stage machine keeps its stage and stable-step count, so
  // a lowered n moves a client that already had enough stable steps on at its next step.
  if (loop_.tracker()) loop_.tracker()->UpdateOptions(options_.detection);
  // The next candidate is generated from the new policy base; candidates already published keep
  // the settings they were generated with (their measurements stay comparable to their
  // predictions). stage_n + 1 candidates, as at connection.
  trials_.SetConfigs(policy::CandidateConfigs(
      options_.policy, static_cast<std::uint32_t>(options_.detection.stage_n + 1)));
  // Plans chosen under the old settings are not recalled: a sequence coming back goes through
  // the stages and is planned with the new ones.
  plans_.Clear();
  plans_.SetCapacity(options_.remembered_plans);
  // New boundary patterns for a client whose loop was not found yet (the usual reason to add
  // one). A client with a boundary keeps it: switching would restart its stages mid-run.
  if (loop_.tracker() || loop_.pattern() || options_.detection.boundary_patterns.empty()) return;
  // The lowest matching token: the kernel seen first, as if the pattern had been there all along.
  std::uint32_t best = std::numeric_limits<std::uint32_t>::max();
  for (const auto& [token, name] : names_) {
    const bool matches = std::any_of(
        options_.detection.boundary_patterns.begin(), options_.detection.boundary_patterns.end(),
        [&](const std::string& p) { return fnmatch(p.c_str(), name.c_str(), 0) == 0; });
    if (matches) best = std::min(best, token);
  }
  if (best != std::numeric_limits<std::uint32_t>::max() && loop_.TryPattern(best, names_[best])) {
    Publish(nullptr);
  }
}

}  // namespace chameleon::daemon
