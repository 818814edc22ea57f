// Places that hold memory (dies, GPUs, NUMA nodes) and directed links between them, with the
// distance tables every placement decision reads.
//
// Links are directed so that a PCIe link can carry different bandwidth each way; AddDuplex adds
// both directions. Finalize() computes, for every ordered pair, the route that minimises
// seconds per byte (Σ 1 / bandwidth over its links; ties broken by fewer hops, then by lower
// place index, so the tables are deterministic) and stores hops, seconds per byte, latency and
// the bottleneck bandwidth of that route. On a mesh of equal links this is the Manhattan route.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace chameleon::topology {

enum class PlaceKind : std::uint8_t { kDie, kGpu, kNumaNode, kOther };

/// Something that holds memory and may compute.
struct Place {
  std::string name;
  PlaceKind kind = PlaceKind::kOther;
  std::uint64_t capacity_bytes = 0;  ///< memory this place holds
  double flops = 0;                  ///< peak FLOP/s (0 for memory-only places such as NUMA)
};

/// One direction of a link.
struct Link {
  int from = 0;
  int to = 0;
  double bandwidth = 0;  ///< bytes/s in this direction
  double latency = 0;    ///< seconds per traversal
};

inline constexpr int kUnreachable = std::numeric_limits<int>::max();

/// A set of places and links with precomputed all-pairs route tables. Immutable after
/// Finalize(); const methods are thread-safe once finalised.
class Topology {
 public:
  int AddPlace(Place place);
  /// Adds one direction; returns the link's index. Throws std::invalid_argument on bad ids.
  int AddLink(int from, int to, double bandwidth, double latency = 0);
  void AddDuplex(int a, int b, double bandwidth, double latency = 0);
  /// Computes the route tables. Call once after the last Add*.
  void Finalize();

  int place_count() const { return static_cast<int>(places_.size()); }
  const Place& place(int i) const { return places_.at(i); }
  const std::vector<Place>& places() const { return places_; }
  const std::vector<Link>& links() const { return links_; }
  /// Index of the link from `a` to `b`, or -1 when they are not neighbours.
  int LinkIndex(int a, int b) const;
  const std::vector<int>& OutLinks(int place) const { return out_links_.at(place); }

  /// Hops on the chosen route; 0 for a == b; kUnreachable when there is no route.
  int Hops(int a, int b) const { return hops_[Cell(a, b)]; }
  /// Σ 1 / bandwidth over the route: the time one byte needs (store-and-forward).
  double SecondsPerByte(int a, int b) const { return seconds_per_byte_[Cell(a, b)]; }
  double Latency(int a, int b) const { return latency_[Cell(a, b)]; }
  /// Smallest link bandwidth on the route (infinity for a == b, 0 when unreachable).
  double Bandwidth(int a, int b) const { return bandwidth_[Cell(a, b)]; }
  /// The places of the route from a to b, both ends included; empty when unreachable.
  std::vector<int> Route(int a, int b) const;

 private:
  std::size_t Cell(int a, int b) const {
    return static_cast<std::size_t>(a) * places_.size() + static_cast<std::size_t>(b);
  }
  void RoutesFrom(int source);

  std::vector<Place> places_;
  std::vector<Link> links_;
  std::vector<std::vector<int>> out_links_;
  std::vector<int> hops_;
  std::vector<double> seconds_per_byte_;
  std::vector<double> latency_;
  std::vector<double> bandwidth_;
  std::vector<int> next_hop_;  ///< next place on the route from a to b
};

}  // namespace chameleon::topology
