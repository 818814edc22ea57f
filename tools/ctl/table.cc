#include "table.h"

#include <algorithm>
#include <cstdio>

namespace chameleon::ctl {

void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (std::size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - row[i].size() + 2, ' ');
    }
    out << line << '\n';
  }
}

std::string Cell(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "-";
  if (value.is_number_float()) {
    char buffer[32];
    std::snprintf(buffer, sizeof(buffer), "%.6g", value.get<double>());
    return buffer;
  }
  return value.dump();
}

void PrintObject(std::ostream& out, const nlohmann::json& object, int indent) {
  std::size_t width = 0;
  for (auto it = object.begin(); it != object.end(); ++it) width = std::max(width, it.key().size());
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string pad(static_cast<std::size_t>(indent), ' ');
    if (it->is_object()) {
      out << pad << it.key() << ":\n";
      PrintObject(out, *it, indent + 2);
      continue;
    }
    std::string value;
    if (it->is_array()) {
      for (const auto& element : *it) {
        value +=
            (value.empty() ? "" : " ") + (element.is_object() ? element.dump() : Cell(element));
      }
      if (value.empty()) value = "-";
    } else {
      value = Cell(*it);
    }
    out << pad << it.key() << std::string(width - it.key().size() + 2, ' ') << value << '\n';
  }
}

}  // namespace chameleon::ctl
