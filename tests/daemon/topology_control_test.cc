// `topology` over the control socket: the node view follows fake clients as they connect and
// leave, the CHAMELEON_TOPOLOGY override's figures and provenance show, and a client whose device
// facts contradict another's is named but keeps its connection.
#include <stdlib.h>

#include <cstdio>
#include <fstream>

#include "daemon_fixture.h"

namespace chameleon::daemon::testing {
namespace {

ipc::DeviceFacts Device(int ordinal, const char* bus, std::uint64_t peers, int numa,
                        std::uint64_t memory = 1ull << 30) {
  return MakeDeviceFacts(ordinal, bus, memory, peers, numa);
}

// The host link a `chameleonctl client` reply says the client's plans assume.
void ExpectHostLink(const nlohmann::json& reply, const char* source, double device_to_host,
                    double host_to_device) {
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  const nlohmann::json& link = reply["client"]["host_link"];
  EXPECT_EQ(link["source"], source) << link.dump();
  EXPECT_DOUBLE_EQ(link["device_to_host_bytes_per_s"].get<double>(), device_to_host);
  EXPECT_DOUBLE_EQ(link["host_to_device_bytes_per_s"].get<double>(), host_to_device);
}

class TopologyControlTest : public DaemonTest {
 protected:
  void Configure(DaemonOptions*) override {
    const std::string path = dir_ + "/machine.yaml";
    std::ofstream(path) << "host_numa_bytes: [2GiB, 4GiB]\nhost_to_device_bandwidth: 5.48e10\n"
                           "device_to_host_bandwidth: 4.68e10\npeer_link_bandwidth: 3.7e11\n";
    setenv("CHAMELEON_TOPOLOGY", path.c_str(), 1);  // read when the daemon is made
  }
  void TearDown() override {
    DaemonTest::TearDown();
    unsetenv("CHAMELEON_TOPOLOGY");
  }
  nlohmann::json Topology() {
    nlohmann::json reply = Control({{"command", "topology"}});
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply["topology"];
  }
  std::unique_ptr<FakeClient> ConnectDevices(std::vector<ipc::DeviceFacts> devices) {
    std::string error;
    auto client = FakeClient::ConnectWithDevices(options_.socket_path, &error, std::move(devices));
    EXPECT_NE(client, nullptr) << error;
    return client;
  }
  static std::size_t Gpus(const nlohmann::json& topology) {
    std::size_t n = 0;
    for (const auto& p : topology["places"]) n += p["kind"] == "gpu";
    return n;
  }
};

TEST_F(TopologyControlTest, ShouldShowTheGpusOfConnectedClientsWithLinksAndProvenance) {
  StartDaemon();
  EXPECT_EQ(Gpus(Topology()), 0u);
  auto a = ConnectDevices({Device(0, "0000:18:00.0", 0b10, 0), Device(1, "0000:19:00.0", 0b01, 0)});
  auto b = ConnectDevices({Device(0, "0000:9a:00.0", 0, 1)});
  ASSERT_TRUE(a && b);
  // HELLO is handled before WELCOME is sent, so the view is current once Connect returns.
  const nlohmann::json t = Topology();
  ASSERT_EQ(Gpus(t), 3u) << t.dump();
  ASSERT_EQ(t["places"].size(), 5u);  // 3 GPUs, 2 NUMA nodes
  EXPECT_EQ(t["places"][0]["pci_bus_id"], "0000:18:00.0");
  EXPECT_EQ(t["places"][2]["numa_node"], 1);
  EXPECT_EQ(t["places"][4]["capacity_bytes"], 4ull << 30);
  EXPECT_EQ(t["provenance"]["numa"], "yaml");
  EXPECT_EQ(t["provenance"]["peer_link"], "yaml");
  bool host_link = false, peer_link = false;
  for (const auto& l : t["links"]) {
    if (l["a"] == "gpu 0000:18:00.0" && l["b"] == "numa0") {
      host_link = true;
      EXPECT_DOUBLE_EQ(l["a_to_b_bandwidth"].get<double>(), 4.68e10);
      EXPECT_DOUBLE_EQ(l["b_to_a_bandwidth"].get<double>(), 5.48e10);
    }
    if (l["a"] == "gpu 0000:18:00.0" && l["b"] == "gpu 0000:19:00.0") {
      peer_link = true;
      EXPECT_DOUBLE_EQ(l["a_to_b_bandwidth"].get<double>(), 3.7e11);
    }
  }
  EXPECT_TRUE(host_link && peer_link) << t["links"].dump();
  for (const auto& r : t["routes"]) {
    if (r["from"] == "gpu 0000:18:00.0" && r["to"] == "gpu 0000:9a:00.0") {
      EXPECT_EQ(r["hops"], 3);  // its host link, the socket link, the other's host link
    }
  }
  b->Disconnect();
  ASSERT_TRUE(WaitFor([&] { return Gpus(Topology()) == 2; }));
}

TEST_F(TopologyControlTest, ShouldPlanWithTheHostLinkOfTheClientsGpuPerDirection) {
  StartDaemon();
  auto a = ConnectDevices({Device(0, "0000:18:00.0", 0, 0)});
  ASSERT_TRUE(a);
  ExpectHostLink(Control({{"command", "client"}, {"id", a->id()}}), "topology", 4.68e10, 5.48e10);
}

TEST_F(TopologyControlTest, ShouldNameAContradictingClientAndKeepServingIt) {
  StartDaemon();
  auto a = ConnectDevices({Device(0, "0000:18:00.0", 0, 0)});
  auto liar = ConnectDevices({Device(0, "0000:18:00.0", 0, 1)});
  ASSERT_TRUE(a && liar);
  const nlohmann::json t = Topology();
  EXPECT_EQ(Gpus(t), 1u);
  ASSERT_EQ(t["refused"].size(), 1u);
  EXPECT_EQ(t["refused"][0]["client"], liar->id());
  EXPECT_EQ(t["refused"][0]["error"],
            "GPU 0000:18:00.0: clients disagree on its host NUMA node (0 vs 1)");
  EXPECT_EQ(Control({{"command", "status"}})["daemon"]["clients"], 2);
  liar->Disconnect();
  ASSERT_TRUE(WaitFor([&] { return Topology()["refused"].empty(); }));
}

}  // namespace
}  // namespace chameleon::daemon::testing

namespace chameleon::daemon::testing {
namespace {

// Without figures from a source the topology's defaults are a guess: the configured one stands.
TEST_F(DaemonTest, ShouldPlanWithTheConfiguredBandwidthWhenTheNodeHasNoLinkFigures) {
  options_.policy.host_bandwidth_bytes_per_s = 12e9;
  StartDaemon();
  std::string error;
  auto a = FakeClient::ConnectWithDevices(options_.socket_path, &error,
                                          {MakeDeviceFacts(0, "0000:18:00.0", 1ull << 30, 0, 0)});
  ASSERT_NE(a, nullptr) << error;
  ExpectHostLink(Control({{"command", "client"}, {"id", a->id()}}), "config", 12e9, 12e9);
}

}  // namespace
}  // namespace chameleon::daemon::testing
