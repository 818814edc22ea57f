#include "chameleon/topology/topology.h"

#include <queue>
#include <stdexcept>
#include <tuple>

namespace chameleon::topology {

int Topology::AddPlace(Place place) {
  places_.push_back(std::move(place));
  out_links_.emplace_back();
  return place_count() - 1;
}

int Topology::AddLink(int from, int to, double bandwidth, double latency) {
  if (from < 0 || to < 0 || from >= place_count() || to >= place_count() || from == to) {
    throw std::invalid_argument("link between unknown or identical places");
  }
  if (!(bandwidth > 0)) throw std::invalid_argument("link bandwidth must be positive");
  links_.push_back(Link{from, to, bandwidth, latency});
  out_links_[from].push_back(static_cast<int>(links_.size()) - 1);
  return static_cast<int>(links_.size()) - 1;
}

void Topology::AddDuplex(int a, int b, double bandwidth, double latency) {
  AddLink(a, b, bandwidth, latency);
  AddLink(b, a, bandwidth, latency);
}

int Topology::LinkIndex(int a, int b) const {
  for (int l : out_links_.at(a)) {
    if (links_[l].to == b) return l;
  }
  return -1;
}

void Topology::Finalize() {
  const std::size_t n = places_.size();
  hops_.assign(n * n, kUnreachable);
  seconds_per_byte_.assign(n * n, std::numeric_limits<double>::infinity());
  latency_.assign(n * n, std::numeric_limits<double>::infinity());
  bandwidth_.assign(n * n, 0);
  next_hop_.assign(n * n, -1);
  for (int s = 0; s < place_count(); ++s) RoutesFrom(s);
}

// Dijkstra on (seconds per byte, hops, predecessor) from `source`. The predecessor of every
// place is kept, so next hops are recovered by walking back from each destination.
void Topology::RoutesFrom(int source) {
  using Key = std::tuple<double, int, int>;  // seconds/byte, hops, place
  const int n = place_count();
  std::vector<int> pred(n, -1);
  std::vector<int> pred_link(n, -1);
  std::vector<bool> done(n, false);
  std::priority_queue<Key, std::vector<Key>, std::greater<>> queue;
  seconds_per_byte_[Cell(source, source)] = 0;
  hops_[Cell(source, source)] = 0;
  queue.emplace(0.0, 0, source);
  while (!queue.empty()) {
    const auto [spb, hops, u] = queue.top();
    queue.pop();
    if (done[u]) continue;
    done[u] = true;
    for (int l : out_links_[u]) {
      const Link& link = links_[l];
      const double cand = spb + 1.0 / link.bandwidth;
      const std::size_t cell = Cell(source, link.to);
      const auto better = std::make_tuple(cand, hops + 1, u) <
                          std::make_tuple(seconds_per_byte_[cell], hops_[cell], pred[link.to]);
      if (!done[link.to] && better) {
        seconds_per_byte_[cell] = cand;
        hops_[cell] = hops + 1;
        pred[link.to] = u;
        pred_link[link.to] = l;
        queue.emplace(cand, hops + 1, link.to);
      }
    }
  }
  latency_[Cell(source, source)] = 0;
  bandwidth_[Cell(source, source)] = std::numeric_limits<double>::infinity();
  for (int d = 0; d < n; ++d) {
    if (d == source || pred[d] < 0) continue;
    double lat = 0;
    double bw = std::numeric_limits<double>::infinity();
    int v = d;
    while (pred[v] != source && pred[v] >= 0) {
      lat += links_[pred_link[v]].latency;
      bw = std::min(bw, links_[pred_link[v]].bandwidth);
      v = pred[v];
    }
    lat += links_[pred_link[v]].latency;
    bw = std::min(bw, links_[pred_link[v]].bandwidth);
    next_hop_[Cell(source, d)] = v;
    latency_[Cell(source, d)] = lat;
    bandwidth_[Cell(source, d)] = bw;
  }
}

std::vector<int> Topology::Route(int a, int b) const {
  if (hops_[Cell(a, b)] == kUnreachable) return {};
  std::vector<int> route{a};
  for (int v = a; v != b;) {
    v = next_hop_[Cell(v, b)];
    route.push_back(v);
  }
  return route;
}

}  // namespace chameleon::topology
