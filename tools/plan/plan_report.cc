#include "plan_report.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

namespace chameleon::plan {
namespace {

using nlohmann::json;
constexpr double kGB = 1e9;

std::string MaskNames(unsigned mask) {
  if (mask == 0) return "none";
  std::string out;
  for (int g = 0; g < kOpGroups; ++g) {
    if (mask >> g & 1U) out += (out.empty() ? "" : "+") + std::string(OpGroupName(g));
  }
  return out;
}

std::string Format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

json StagesJson(const PlanProblem& p, const PlanEvaluation& e) {
  json stages = json::array();
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const StageReport& r = e.stages[s];
    stages.push_back({{"stage", s},
                      {"slot", r.slot},
                      {"dies", p.slot_dies[r.slot]},
                      {"first_layer", r.first_layer},
                      {"layers", r.layers},
                      {"recompute", MaskNames(r.recompute)},
                      {"in_flight", r.in_flight},
                      {"param_bytes", r.param_bytes},
                      {"activation_bytes", r.activation_bytes},
                      {"borrowed_bytes", r.borrowed},
                      {"lent_bytes", r.lent},
                      {"time_s", r.compute_time + r.comm_time},
                      {"compute_s", r.compute_time},
                      {"comm_s", r.comm_time}});
  }
  return stages;
}

json LinksJson(const PlanProblem& p, const PlanEvaluation& e) {
  json links = json::array();
  for (std::size_t l = 0; l < e.link_bytes.size(); ++l) {
    if (e.link_bytes[l] <= 0) continue;
    const auto& link = p.topo.links()[l];
    links.push_back({{"from", p.topo.place(link.from).name},
                     {"to", p.topo.place(link.to).name},
                     {"bytes_per_micro_batch", e.link_bytes[l]},
                     {"utilisation", e.link_utilisation[l]},
                     {"congested", e.link_utilisation[l] > kCongestedLink}});
  }
  return links;
}

json Summary(const PlanEvaluation& e) {
  return {{"t_max", e.t_max},
          {"iteration_time", e.iteration_time},
          {"throughput_tokens_per_s", e.tokens_per_s},
          {"global_cost", e.global_cost},
          {"fits", e.fits},
          {"shortfall_bytes", e.shortfall},
          {"dram_utilisation", e.dram_utilisation},
          {"peak_link_utilisation", e.peak_link_utilisation}};
}

}  // namespace

json PlanJson(const PlanReport& r) {
  const PlanEvaluation& e = r.search.evaluation;
  json j = Summary(e);
  j["command"] = r.command;
  j["model"] = {{"name", r.problem.model.name},
                {"source", r.problem.model.source},
                {"params", ModelParams(r.problem.model)}};
  j["topology"] = {{"name", r.problem.wafer.name},
                   {"width", r.problem.wafer.width},
                   {"height", r.problem.wafer.height},
                   {"dram_per_die_bytes", r.problem.wafer.dram_per_die},
                   {"d2d_bytes_per_s", r.problem.wafer.d2d_bandwidth},
                   {"flops_per_die", r.problem.wafer.flops_per_die}};
  j["pipeline"] = {{"stages", r.problem.stages},
                   {"dies_per_stage", r.problem.dies_per_stage},
                   {"micro_batches", r.problem.micro_batches},
                   {"schedule", "1F1B"}};
  j["shortfall_reason"] = e.shortfall_reason;
  j["stages"] = StagesJson(r.problem, e);
  j["dies"] = json::array();
  for (double used : e.die_used) {
    j["dies"].push_back(
        {{"used_bytes", used},
         {"utilisation", used / static_cast<double>(r.problem.wafer.dram_per_die)}});
  }
  j["links"] = LinksJson(r.problem, e);
  j["links_over_90"] = std::count_if(e.link_utilisation.begin(), e.link_utilisation.end(),
                                     [](double u) { return u > kCongestedLink; });
  j["pairings"] = json::array();
  for (const auto& g : e.grants) {
    j["pairings"].push_back({{"sender", r.problem.topo.place(e.senders[g.sender].place).name},
                             {"helper", r.problem.topo.place(e.helpers[g.helper].place).name},
                             {"bytes", g.bytes}});
  }
  j["dataflow"] = json::array();
  for (const auto& d : LayerDataflows(r.problem.model, r.problem.dies_per_stage)) {
    j["dataflow"].push_back({{"op", d.op},
                             {"choice", DataflowName(d.choice)},
                             {"ema_os", d.ema[0]},
                             {"ema_ws", d.ema[1]},
                             {"ema_is", d.ema[2]}});
  }
  j["baseline"] = Summary(r.baseline);
  j["baseline"]["kind"] = "megatron-in-order";
  j["gain_over_baseline"] = e.tokens_per_s / r.baseline.tokens_per_s;
  j["search"] = {{"seed", r.seed},
                 {"evaluations", r.search.evaluations},
                 {"generations", r.search.generations},
                 {"seconds", r.search.seconds}};
  return j;
}

std::string PlanText(const PlanReport& r) {
  const PlanEvaluation& e = r.search.evaluation;
  std::ostringstream out;
  out << r.problem.model.name << " on " << r.problem.wafer.name << " (" << r.problem.wafer.width
      << "x" << r.problem.wafer.height << "), " << r.problem.stages << " stages x "
      << r.problem.dies_per_stage << " dies, " << r.problem.micro_batches << " micro-batches\n";
  out << "stage slot layers recompute             mem/die GB  borrowed GB  lent GB  time ms\n";
  for (std::size_t s = 0; s < e.stages.size(); ++s) {
    const StageReport& st = e.stages[s];
    const double mem = (st.param_bytes + st.activation_bytes) / r.problem.dies_per_stage / kGB;
    char line[200];
    std::snprintf(line, sizeof line, "%5zu %4d %6d %-22s %9.1f %12.1f %8.1f %8.3f\n", s, st.slot,
                  st.layers, MaskNames(st.recompute).c_str(), mem, st.borrowed / kGB, st.lent / kGB,
                  (st.compute_time + st.comm_time) * 1e3);
    out << line;
  }
  out << Format("t_max %.3f ms, iteration %.3f s, throughput %.0f tokens/s\n", e.t_max * 1e3,
                e.iteration_time, e.tokens_per_s);
  out << Format("GlobalCost %.4f s, DRAM utilisation %.1f %%, peak link load %.1f %%\n",
                e.global_cost, e.dram_utilisation * 100, e.peak_link_utilisation * 100);
  for (std::size_t l = 0; l < e.link_utilisation.size(); ++l) {
    if (e.link_utilisation[l] <= kCongestedLink) continue;
    const auto& link = r.problem.topo.links()[l];
    out << "  congested link " << r.problem.topo.place(link.from).name << " -> "
        << r.problem.topo.place(link.to).name << Format(": %.1f %%\n", e.link_utilisation[l] * 100);
  }
  if (!e.fits) {
    out << Format("DOES NOT FIT: short by %.1f GB (best partial plan shown): ", e.shortfall / kGB)
        << e.shortfall_reason << "\n";
  }
  out << Format("baseline (Megatron-style in order): t_max %.3f ms, DRAM %.1f %%; gain %.2fx\n",
                r.baseline.t_max * 1e3, r.baseline.dram_utilisation * 100,
                e.tokens_per_s / r.baseline.tokens_per_s);
  out << Format("search: %.0f evaluations, %.0f generations, %.3f s\n",
                static_cast<double>(r.search.evaluations), r.search.generations, r.search.seconds);
  return out.str();
}

std::string PlanSvg(const PlanProblem& p, const PlanEvaluation& e) {
  constexpr int kCell = 60, kGap = 20;
  const int pitch = kCell + kGap;
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << p.wafer.width * pitch + kGap
      << "' height='" << p.wafer.height * pitch + kGap + 20 << "' font-family='monospace'>\n";
  const auto colour = [](double u) {
    const int red = static_cast<int>(255 * std::clamp(u, 0.0, 1.0));
    return "rgb(" + std::to_string(red) + ",64," + std::to_string(255 - red) + ")";
  };
  std::vector<int> stage_of_slot(p.stages);
  for (std::size_t s = 0; s < e.stages.size(); ++s) stage_of_slot[e.stages[s].slot] = s;
  for (int d = 0; d < p.wafer.dies(); ++d) {
    const int x = kGap + topology::DieX(p.wafer, d) * pitch;
    const int y = kGap + topology::DieY(p.wafer, d) * pitch;
    const double u = e.die_used[d] / static_cast<double>(p.wafer.dram_per_die);
    const int slot = static_cast<int>(
        std::find_if(p.slot_dies.begin(), p.slot_dies.end(),
                     [d](const auto& v) { return std::count(v.begin(), v.end(), d); }) -
        p.slot_dies.begin());
    svg << "<rect x='" << x << "' y='" << y << "' width='" << kCell << "' height='" << kCell
        << "' fill='" << colour(u) << "'/>\n<text x='" << x + 4 << "' y='" << y + 16
        << "' fill='white' font-size='11'>s" << stage_of_slot[slot] << "</text><text x='" << x + 4
        << "' y='" << y + 32 << "' fill='white' font-size='11'>" << static_cast<int>(u * 100)
        << "%</text>\n";
  }
  for (std::size_t l = 0; l < e.link_utilisation.size(); ++l) {
    const auto& link = p.topo.links()[l];
    if (link.from > link.to) continue;  // one bar per pair: the busier direction
    const double u =
        std::max(e.link_utilisation[l], e.link_utilisation[p.topo.LinkIndex(link.to, link.from)]);
    const int x0 = kGap + topology::DieX(p.wafer, link.from) * pitch + kCell / 2;
    const int y0 = kGap + topology::DieY(p.wafer, link.from) * pitch + kCell / 2;
    const int x1 = kGap + topology::DieX(p.wafer, link.to) * pitch + kCell / 2;
    const int y1 = kGap + topology::DieY(p.wafer, link.to) * pitch + kCell / 2;
    const int mx = (x0 + x1) / 2, my = (y0 + y1) / 2;
    const bool horizontal = y0 == y1;
    svg << "<rect x='" << (horizontal ? mx - kGap / 2 : mx - 6) << "' y='"
        << (horizontal ? my - 6 : my - kGap / 2) << "' width='" << (horizontal ? kGap : 12)
        << "' height='" << (horizontal ? 12 : kGap) << "' fill='" << colour(u) << "' stroke='"
        << (u > kCongestedLink ? "black" : "none") << "'/>\n";
  }
  svg << "<text x='" << kGap << "' y='" << p.wafer.height * pitch + kGap + 10
      << "' font-size='11'>die: DRAM used (blue 0 % .. red 100 %); bars: link "
         "load</text>\n</svg>\n";
  return svg.str();
}

}  // namespace chameleon::plan
