// Polling with a deadline, for tests that wait on another thread or process (a daemon's loop, a
// trainer, a server): the condition is re-checked every few milliseconds, never slept on blindly.
// The one such helper of the test tree; header-only, thread-safe (no state of its own).
#pragma once

#include <chrono>
#include <thread>

namespace chameleon::test_support {

/// Polls `done` every `interval` until it holds or `timeout` passes; the last check is made at
/// the deadline, so a condition that becomes true just in time still counts.
template <typename Done>
bool WaitFor(Done&& done, std::chrono::milliseconds timeout = std::chrono::seconds(10),
             std::chrono::milliseconds interval = std::chrono::milliseconds(2)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(interval);
  }
  return done();
}

}  // namespace chameleon::test_support
