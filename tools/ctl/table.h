// Plain-text rendering for chameleonctl: aligned tables and key/value blocks.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace chameleon::ctl {

/// Prints `rows` (the first is the header) with every column padded to its widest cell.
void PrintTable(std::ostream& out, const std::vector<std::vector<std::string>>& rows);

/// A JSON scalar as a table cell: strings unquoted, floats with up to 6 significant digits.
std::string Cell(const nlohmann::json& value);

/// Prints an object as aligned "key  value" lines, nested objects indented.
void PrintObject(std::ostream& out, const nlohmann::json& object, int indent = 0);

}  // namespace chameleon::ctl
