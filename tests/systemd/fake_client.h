// A minimal Chameleon client on the ipc library, for tests that need chameleond to serve someone
// without a GPU, the shim or simgpu: it creates a segment, says HELLO with the segment's fd,
// then publishes a strictly periodic op stream (the same `ops_per_iteration` kernel tokens every
// iteration) and heartbeats, from a thread, until destroyed. Not thread-safe (the thread is its
// own).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "chameleon/ipc/segment.h"

namespace chameleon::service_test {

class FakeClient {
 public:
  /// Connects and completes the handshake; nullptr (and *error) when refused or unreachable.
  static std::unique_ptr<FakeClient> Connect(const std::string& socket_path,
                                             std::uint32_t ops_per_iteration,
                                             std::uint64_t device_bytes, std::string* error);
  ~FakeClient();
  FakeClient(const FakeClient&) = delete;
  FakeClient& operator=(const FakeClient&) = delete;

  std::uint32_t client_id() const { return client_id_; }
  std::uint64_t iterations_published() const { return iterations_.load(); }

 private:
  FakeClient() = default;
  void Run();

  int sock_ = -1;
  ipc::Segment segment_;
  std::uint32_t client_id_ = 0;
  std::uint32_t ops_per_iteration_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> iterations_{0};
  std::thread thread_;
};

}  // namespace chameleon::service_test
