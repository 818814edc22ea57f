#include "fake_client.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "chameleon/ipc/event_records.h"
#include "chameleon/ipc/event_ring.h"
#include "chameleon/ipc/name_table.h"
#include "chameleon/ipc/socket_protocol.h"
#include "chameleon/ipc/unix_socket.h"

namespace chameleon::service_test {

std::unique_ptr<FakeClient> FakeClient::Connect(const std::string& socket_path,
                                                std::uint32_t ops_per_iteration,
                                                std::uint64_t device_bytes, std::string* error) {
  std::unique_ptr<FakeClient> client(new FakeClient());
  client->ops_per_iteration_ = ops_per_iteration;
  client->sock_ = ipc::ConnectUnix(socket_path, 2000);
  if (client->sock_ < 0) {
    *error = "cannot connect to " + socket_path;
    return nullptr;
  }
  const ipc::SegmentError err = ipc::Segment::Create(ipc::SegmentGeometry{}, &client->segment_);
  if (err != ipc::SegmentError::kOk) {
    *error = std::string("segment: ") + ipc::ToString(err);
    return nullptr;
  }
  ipc::Hello hello;
  hello.fixed.layout_major = ipc::kLayoutMajor;
  hello.fixed.layout_minor = ipc::kLayoutMinor;
  hello.fixed.pid = static_cast<std::int32_t>(getpid());
  hello.fixed.segment_bytes = client->segment_.bytes();
  ipc::DeviceFacts device{};
  device.host_numa_node = -1;
  device.total_memory = device_bytes;
  std::strncpy(device.pci_bus_id, "0000:00:00.0", sizeof(device.pci_bus_id) - 1);
  hello.devices.push_back(device);
  hello.fixed.device_count = 1;
  std::vector<std::uint8_t> bytes;
  ipc::EncodeHello(hello, &bytes);
  if (ipc::SendWithFd(client->sock_, bytes, client->segment_.fd()) != 0) {
    *error = "HELLO could not be sent";
    return nullptr;
  }
  ipc::MessageHeader header{};
  std::vector<std::uint8_t> payload;
  int received_fd = -1;
  ipc::DecodeError derr = ipc::DecodeError::kOk;
  const int rc = ipc::ReceiveMessage(client->sock_, 5000, &header, &payload, &received_fd, &derr);
  if (received_fd >= 0) close(received_fd);
  ipc::Welcome welcome{};
  if (rc != 0 || header.type != static_cast<std::uint16_t>(ipc::MessageType::kWelcome) ||
      ipc::DecodeWelcome(payload, &welcome) != ipc::DecodeError::kOk) {
    *error = "no WELCOME from the daemon (rc " + std::to_string(rc) + ")";
    return nullptr;
  }
  client->client_id_ = welcome.client_id;
  client->segment_.CloseFd();
  client->thread_ = std::thread([c = client.get()] { c->Run(); });
  return client;
}

FakeClient::~FakeClient() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (sock_ >= 0) close(sock_);
}

void FakeClient::Run() {
  ipc::EventRingProducer ring = segment_.ring_producer();
  ipc::NameTableWriter names = segment_.name_writer();
  for (std::uint32_t i = 0; i < ops_per_iteration_; ++i) {
    names.Append(ipc::kFirstKernelToken + i, "fake_kernel_" + std::to_string(i));
  }
  ipc::SegmentHeader* header = segment_.header();
  while (!stop_) {
    header->client_heartbeat_ns.store(ipc::MonotonicNowNs(), std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < ops_per_iteration_; ++i) {
      ipc::LaunchRecord launch{};
      launch.token = ipc::kFirstKernelToken + i;
      ring.Push(ipc::RecordType::kLaunch, 0, &launch, sizeof(launch));
    }
    iterations_.fetch_add(1);
    // Pacing of the workload (one "iteration" per 2 ms), not synchronisation.
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

}  // namespace chameleon::service_test
