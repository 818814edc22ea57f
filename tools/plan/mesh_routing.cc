#include "mesh_routing.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <utility>

namespace chameleon::plan {

MeshRouter::MeshRouter(const topology::WaferSpec& spec, const topology::Topology& topo)
    : spec_(spec), topo_(topo), load_(topo.links().size(), 0.0) {}

void MeshRouter::AddLoad(const std::vector<int>& links, double bytes) {
  for (int l : links) load_[l] += bytes;
}

// Dynamic programme over the rectangle spanned by the two dies: every minimal path moves only
// toward `to` in x and in y, so cell (i, j) (i steps in x, j in y) is reached from (i-1, j) or
// (i, j-1). The score of a path is (max link load, sum of link loads), compared in that order.
std::vector<int> MeshRouter::RouteAvoidingLoad(int from, int to, double bytes) {
  using topology::DieIndex;
  const int x0 = topology::DieX(spec_, from), y0 = topology::DieY(spec_, from);
  const int x1 = topology::DieX(spec_, to), y1 = topology::DieY(spec_, to);
  const int dx = x1 >= x0 ? 1 : -1, dy = y1 >= y0 ? 1 : -1;
  const int nx = std::abs(x1 - x0) + 1, ny = std::abs(y1 - y0) + 1;
  using Score = std::pair<double, double>;
  const Score kNone{std::numeric_limits<double>::infinity(), 0};
  std::vector<Score> best(nx * ny, kNone);
  std::vector<int> via(nx * ny, -1);  // link that entered the cell on the best path
  best[0] = {0, 0};
  const auto die = [&](int i, int j) { return DieIndex(spec_, x0 + i * dx, y0 + j * dy); };
  for (int j = 0; j < ny; ++j) {
    for (int i = 0; i < nx; ++i) {
      const int cell = j * nx + i;
      const auto relax = [&](int pi, int pj) {
        const int link = topo_.LinkIndex(die(pi, pj), die(i, j));
        const Score& p = best[pj * nx + pi];
        const Score cand{std::max(p.first, load_[link]), p.second + load_[link]};
        if (cand < best[cell]) best[cell] = cand, via[cell] = link;
      };
      // Arriving from below first: on a tie the path ends in y, so it went along x first.
      if (j > 0) relax(i, j - 1);
      if (i > 0) relax(i - 1, j);
    }
  }
  std::vector<int> links;
  for (int cell = nx * ny - 1; cell > 0;) {
    const int link = via[cell];
    links.push_back(link);
    const int prev = topo_.links()[link].from;
    const int pi = std::abs(topology::DieX(spec_, prev) - x0);
    const int pj = std::abs(topology::DieY(spec_, prev) - y0);
    cell = pj * nx + pi;
  }
  std::reverse(links.begin(), links.end());
  AddLoad(links, bytes);
  return links;
}

}  // namespace chameleon::plan
