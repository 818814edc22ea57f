// CUDA_VISIBLE_DEVICES: which devices of the simulated node this process sees, in the order that
// becomes its ordinals, as the real driver does (so two processes of one node can both call a
// different node device "device 0"). Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace chameleon::simgpu {

struct Config;

/// The 16 UUID bytes of node device `node_index`: "simgpu", zeros, the index in the last byte.
std::array<unsigned char, 16> NodeDeviceUuid(int node_index);
/// Its nvidia-smi form, "GPU-73696d67-7075-0000-0000-0000000000<index in hex>".
std::string NodeDeviceUuidString(int node_index);

/// Parses a CUDA_VISIBLE_DEVICES value against a node of `node_devices` devices: a comma list of
/// node device indices or UUID strings (surrounding spaces ignored). Returns "" and the node
/// indices in ordinal order, or a message naming the entry at fault (an unknown index or UUID, a
/// duplicate, a MIG id, anything else). An empty value is an error too: no device visible.
std::string ParseVisibleDevices(std::string_view text, int node_devices, std::vector<int>* out);

/// Reads CUDA_VISIBLE_DEVICES (unset: every node device, as before) and narrows `c` from the
/// node's devices to the visible ones: capacities, NUMA nodes and the peer table are remapped to
/// ordinals, `c->node_index` maps each ordinal back. `*empty` tells "no device" from malformed.
std::string ApplyVisibleDevices(Config* c, bool* empty);

}  // namespace chameleon::simgpu
