#include "chameleon/policy/explain.h"

#include <algorithm>
#include <cstdio>

#include "chameleon/policy/anchors.h"

namespace chameleon::policy {
namespace {

constexpr std::size_t kMaxPoints = 2000;
constexpr double kMiB = 1024.0 * 1024.0;

const char* TierName(ipc::Tier tier) {
  switch (tier) {
    case ipc::Tier::kHost:
      return "host";
    case ipc::Tier::kPeerGpu:
      return "peer-gpu";
    case ipc::Tier::kHostNuma:
      return "host-numa";
  }
  return "unknown";
}

// Ops >= n belong to the next iteration (swaps across the boundary); same anchor.
std::string Anchor(const std::vector<OpAnchor>& anchors, std::uint32_t op) {
  const OpAnchor& a = anchors[op % anchors.size()];
  return std::to_string(a.token) + "#" + std::to_string(a.occurrence);
}

// Down-samples to at most kMaxPoints buckets, keeping each bucket's maximum (peaks survive).
std::vector<std::pair<std::size_t, double>> Buckets(const std::vector<std::uint64_t>& mem) {
  std::vector<std::pair<std::size_t, double>> points;
  const std::size_t step = std::max<std::size_t>(1, (mem.size() + kMaxPoints - 1) / kMaxPoints);
  for (std::size_t i = 0; i < mem.size(); i += step) {
    const auto end = mem.begin() + static_cast<std::ptrdiff_t>(std::min(mem.size(), i + step));
    points.emplace_back(
        i, *std::max_element(mem.begin() + static_cast<std::ptrdiff_t>(i), end) / kMiB);
  }
  return points;
}

std::string Format(const char* fmt, double a, double b = 0, double c = 0, double d = 0) {
  char buffer[160];
  std::snprintf(buffer, sizeof(buffer), fmt, a, b, c, d);
  return buffer;
}

}  // namespace

void WritePlanTable(const Plan& plan, const Profile& profile, std::ostream& out) {
  out << Format("limit %.1f MiB  peak %.1f -> %.1f MiB\n", plan.device_limit_bytes / kMiB,
                plan.peak_before_bytes / kMiB, plan.predicted_peak_bytes / kMiB)
      << Format("iteration %.6f s  stall %.6f s  predicted %.6f s  %.0f swaps\n", plan.iteration_s,
                plan.predicted_stall_s, plan.predicted_iteration_s,
                static_cast<double>(plan.swaps.size()))
      << "tensor      MiB  out(op tok#occ)      in(op tok#occ)       use(op tok#occ)    "
         " stall_s    tier\n";
  const std::vector<OpAnchor> anchors = AnchorOps(profile);
  for (const PlannedSwap& s : plan.swaps) {
    char line[256];
    std::snprintf(line, sizeof(line), "%-8u %7.1f  %6u %-12s  %6u %-12s  %6u %-12s %9.6f  %s\n",
                  s.tensor, s.bytes / kMiB, s.out_after_op, Anchor(anchors, s.out_after_op).c_str(),
                  s.in_start_op, Anchor(anchors, s.in_start_op).c_str(), s.use_op,
                  Anchor(anchors, s.use_op).c_str(), s.stall_s, TierName(s.tier));
    out << line;
  }
}

void WritePlanCsv(const Plan& plan, const Profile& profile, std::ostream& out) {
  out << "tensor,external_id,bytes,out_op,out_token,out_occurrence,free_from_op,in_op,in_token,"
         "in_occurrence,use_op,use_token,use_occurrence,transfer_s,stall_s,score,tier\n";
  const std::vector<OpAnchor> anchors = AnchorOps(profile);
  const auto at = [&](std::uint32_t op) { return anchors[op % anchors.size()]; };
  for (const PlannedSwap& s : plan.swaps) {
    out << s.tensor << ',' << profile.tensors[s.tensor].external_id << ',' << s.bytes << ','
        << s.out_after_op << ',' << at(s.out_after_op).token << ',' << at(s.out_after_op).occurrence
        << ',' << s.free_from_op << ',' << s.in_start_op << ',' << at(s.in_start_op).token << ','
        << at(s.in_start_op).occurrence << ',' << s.use_op << ',' << at(s.use_op).token << ','
        << at(s.use_op).occurrence << ','
        << Format("%.9g,%.9g,%.6g", s.transfer_s, s.stall_s, s.score) << ',' << TierName(s.tier)
        << '\n';
  }
}

void WriteMemoryTimelineSvg(const Plan& plan, std::ostream& out) {
  constexpr double kWidth = 1000, kHeight = 400, kPad = 40;
  const auto before = Buckets(plan.memory_before);
  const auto after = Buckets(plan.memory_after);
  double top = plan.device_limit_bytes / kMiB;
  for (const auto& p : before) top = std::max(top, p.second);
  top = std::max(top * 1.05, 1e-9);
  const double ops = static_cast<double>(std::max<std::size_t>(plan.memory_before.size(), 1));
  const auto x = [&](std::size_t op) { return kPad + (kWidth - 2 * kPad) * op / ops; };
  const auto y = [&](double mib) { return kHeight - kPad - (kHeight - 2 * kPad) * mib / top; };
  out << Format("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\">\n",
                kWidth, kHeight)
      << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  for (const auto* series : {&before, &after}) {
    out << "<polyline fill=\"none\" stroke=\"" << (series == &before ? "#999999" : "#1f5fbf")
        << "\" stroke-width=\"1.5\" points=\"";
    for (const auto& p : *series) out << Format("%.1f,%.1f ", x(p.first), y(p.second));
    out << "\"/>\n";
  }
  const double limit_y = y(plan.device_limit_bytes / kMiB);
  out << Format("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"red\"/>\n", kPad,
                limit_y, kWidth - kPad, limit_y)
      << Format(
             "<text x=\"%.0f\" y=\"20\" font-size=\"14\">memory per op (MiB): before (grey),"
             " after (blue), limit (red); peak %.1f -> %.1f MiB</text>\n",
             kPad, plan.peak_before_bytes / kMiB, plan.predicted_peak_bytes / kMiB)
      << "</svg>\n";
}

void WriteMemoryTimelineGnuplot(const Plan& plan, const std::string& png_path, std::ostream& out) {
  const auto before = Buckets(plan.memory_before);
  const auto after = Buckets(plan.memory_after);
  std::string quoted;  // gnuplot escapes a quote inside '...' by doubling it
  for (char ch : png_path) quoted += ch == '\'' ? std::string("''") : std::string(1, ch);
  out << "set terminal pngcairo size 1200,500\nset output '" << quoted << "'\n"
      << "set xlabel 'op'\nset ylabel 'MiB'\nset key top left\n$data << EOD\n";
  for (std::size_t i = 0; i < before.size(); ++i) {
    out << before[i].first << ' ' << Format("%.3f %.3f", before[i].second, after[i].second) << '\n';
  }
  out << "EOD\n"
      << Format(
             "plot $data using 1:2 with lines title 'before', $data using 1:3 with lines "
             "title 'after', %.3f with lines title 'limit'\n",
             plan.device_limit_bytes / kMiB);
}

}  // namespace chameleon::policy
