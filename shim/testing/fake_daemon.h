// A minimal stand-in for chameleond used by the shim's tests and benchmark: it listens on a UNIX
// socket, answers each HELLO with WELCOME, maps the client's segment and lets the test drain its
// ring, read its name table and publish policies. Not a daemon: no validation beyond what ipc
// does, no metrics.
//
// Thread-safety: the accept thread owns the listening socket; client access is guarded by an
// internal mutex (client() returns a pointer that stays valid until Stop()).
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/event_ring.h"
#include "chameleon/ipc/name_table.h"
#include "chameleon/ipc/policy_mailbox.h"
#include "chameleon/ipc/segment.h"
#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/ipc/unix_socket.h"

namespace chameleon::shim::testing {

/// One record copied out of the ring.
struct Record {
  ipc::RecordType type;
  std::uint16_t flags;
  std::vector<std::uint8_t> payload;

  template <typename T>
  T As() const {
    T value{};
    std::memcpy(&value, payload.data(), std::min(payload.size(), sizeof(T)));
    return value;
  }
  /// Tensor ids that follow a LaunchRecord.
  std::vector<std::uint64_t> Tensors() const;
};

struct FakeClient {
  int sock = -1;
  ipc::Hello hello;
  ipc::PeerCredentials creds;
  ipc::Segment segment;
  ipc::EventRingConsumer consumer;
  ipc::NameTableReader names_reader;
  ipc::PolicyMailboxWriter mailbox;
  std::map<std::uint32_t, std::string> names;
  std::uint32_t id = 0;

  /// Drains every committed record (and any new names).
  std::vector<Record> Drain();
};

class FakeDaemon {
 public:
  FakeDaemon() = default;
  ~FakeDaemon() { Stop(); }

  /// Listens on `path` (an existing file there is removed first). False on failure.
  bool Start(const std::string& path);
  void Stop();

  /// Waits until at least `count` clients have completed the handshake.
  bool WaitForClients(std::size_t count, int timeout_ms);
  std::size_t client_count();
  FakeClient* client(std::size_t index);
  /// Closes the connection of client `index` (the shim sees the daemon go away).
  void Disconnect(std::size_t index);
  /// While held, an accepted connection waits for its handshake (a daemon slow to answer: the
  /// shim's HELLO stays unread and no WELCOME is sent) until HoldHandshakes(false).
  void HoldHandshakes(bool hold);
  /// Connections accepted so far (handshaken or not).
  std::size_t accepted();

 private:
  void AcceptLoop();
  void Handshake(int sock);

  std::string path_;
  int listen_fd_ = -1;
  int wake_pipe_[2] = {-1, -1};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<FakeClient>> clients_;
  std::uint32_t next_id_ = 1;
  bool hold_ = false;         // guarded by mu_
  bool stopping_ = false;     // guarded by mu_
  std::size_t accepted_ = 0;  // guarded by mu_
};

}  // namespace chameleon::shim::testing
