// Polling with a deadline, for tests that wait on another thread or process (the daemon's loop,
// a trainer): the condition is re-checked every few milliseconds, never slept on blindly.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace daemon_test {

/// Polls `done` until it holds or `timeout_ms` passes; the last check is made at the deadline.
inline bool WaitFor(const std::function<bool()>& done, int timeout_ms = 10000) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return done();
}

}  // namespace daemon_test
