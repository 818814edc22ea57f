#include "machine_presets.h"

namespace chameleon::simgpu {
namespace {

constexpr MachinePreset kPresets[] = {
#include "machine_presets_gen.inc"
};

}  // namespace

const MachinePreset* FindMachinePreset(std::string_view name) {
  for (const MachinePreset& p : kPresets) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string MachinePresetNames() {
  std::string names;
  for (const MachinePreset& p : kPresets) {
    if (!names.empty()) names += '|';
    names += p.name;
  }
  return names;
}

}  // namespace chameleon::simgpu
