// The machine presets SIMGPU_MACHINE selects: the YAML text of simgpu/machines/<name>.yaml,
// embedded at build time (the same files are installed for CHAMELEON_TOPOLOGY), so that each
// figure of a machine is written once. Thread-safe (constant data).
#pragma once

#include <string>
#include <string_view>

namespace chameleon::simgpu {

/// The machine used when SIMGPU_MACHINE is unset or empty: today's calibrated defaults.
inline constexpr std::string_view kDefaultMachine = "a100-pcie4";

/// One preset: its name and its YAML document (the SIMGPU_TOPOLOGY schema).
struct MachinePreset {
  std::string_view name;
  std::string_view yaml;
};

/// The preset called `name`, or nullptr.
const MachinePreset* FindMachinePreset(std::string_view name);

/// "a100-pcie4|h100-sxm5|h200-sxm", for error messages.
std::string MachinePresetNames();

}  // namespace chameleon::simgpu
