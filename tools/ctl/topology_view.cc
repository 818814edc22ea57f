#include "topology_view.h"

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "table.h"

namespace chameleon::ctl {
namespace {

using nlohmann::json;
using Rows = std::vector<std::vector<std::string>>;

// A figure scaled by `unit` with one decimal ("141.0"); "-" when absent.
std::string Scaled(const json& value, double unit) {
  if (!value.is_number()) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%.1f", value.get<double>() / unit);
  return buffer;
}

std::string Joined(const json& list) {
  std::string text;
  for (const json& e : list) text += (text.empty() ? "" : ",") + Cell(e);
  return text.empty() ? "-" : text;
}

void PrintPlaces(std::ostream& out, const json& places) {
  Rows rows{{"PLACE", "NAME", "KIND", "CAPACITY_GIB", "NUMA", "PEERS"}};
  for (const json& p : places) {
    rows.push_back({Cell(p.value("place", json())), Cell(p.value("name", json())),
                    Cell(p.value("kind", json())),
                    Scaled(p.value("capacity_bytes", json()), 1 << 30),
                    Cell(p.value("numa_node", json())), Joined(p.value("peers", json::array()))});
  }
  PrintTable(out, rows);
}

void PrintLinks(std::ostream& out, const json& links) {
  Rows rows{{"A", "B", "A->B_GB/S", "B->A_GB/S", "LATENCY_US"}};
  for (const json& l : links) {
    rows.push_back({Cell(l.value("a", json())), Cell(l.value("b", json())),
                    Scaled(l.value("a_to_b_bandwidth", json()), 1e9),
                    Scaled(l.value("b_to_a_bandwidth", json()), 1e9),
                    Scaled(l.value("latency_s", json()), 1e-6)});
  }
  PrintTable(out, rows);
}

// One square table over the place numbers: `field` of the route from row to column.
void PrintMatrix(std::ostream& out, const json& places, const json& routes, const char* field,
                 double unit) {
  std::map<std::string, std::string> number;  // place name -> its number
  Rows rows{{"FROM\\TO"}};
  for (const json& p : places) {
    number[Cell(p.value("name", json()))] = Cell(p.value("place", json()));
    rows[0].push_back(Cell(p.value("place", json())));
  }
  std::map<std::pair<std::string, std::string>, std::string> cells;
  for (const json& r : routes) {
    const json v = r.value(field, json());
    cells[{number[Cell(r.value("from", json()))], number[Cell(r.value("to", json()))]}] =
        !r.value("reachable", true) ? "x"
        : unit == 1                 ? Cell(v)
                                    : Scaled(v, unit);
  }
  for (std::size_t i = 1; i < rows[0].size(); ++i) {
    std::vector<std::string> row{rows[0][i]};
    for (std::size_t j = 1; j < rows[0].size(); ++j) {
      const auto it = cells.find({rows[0][i], rows[0][j]});
      row.push_back(i == j ? "." : it == cells.end() ? "-" : it->second);
    }
    rows.push_back(std::move(row));
  }
  PrintTable(out, rows);
}

void PrintLines(std::ostream& out, const char* title, const std::vector<std::string>& lines) {
  if (lines.empty()) return;
  out << '\n' << title << ":\n";
  for (const std::string& l : lines) out << "  " << l << '\n';
}

}  // namespace

void PrintTopology(std::ostream& out, const json& topology) {
  const json places = topology.value("places", json::array());
  const json routes = topology.value("routes", json::array());
  PrintPlaces(out, places);
  out << '\n';
  PrintLinks(out, topology.value("links", json::array()));
  out << "\nhops:\n";
  PrintMatrix(out, places, routes, "hops", 1);
  out << "\nbottleneck bandwidth (GB/s):\n";
  PrintMatrix(out, places, routes, "bandwidth", 1e9);
  out << "\nprovenance:\n";
  PrintObject(out, topology.value("provenance", json::object()), 2);
  std::vector<std::string> warnings;
  for (const json& w : topology.value("warnings", json::array())) warnings.push_back(Cell(w));
  PrintLines(out, "warnings", warnings);
  std::vector<std::string> refused;
  for (const json& r : topology.value("refused", json::array()))
    refused.push_back("client " + Cell(r.value("client", json())) + ": " +
                      Cell(r.value("error", json())));
  PrintLines(out, "left out", refused);
}

}  // namespace chameleon::ctl
