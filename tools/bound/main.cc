// chameleon-bound: prints the transfer bound (policy::ComputeTransferBound) of one workload at
// one limit as a JSON object, so that scripts/evaluate uses the same tested function as the
// C++ code. Sizes take the byte-size grammar (ipc/byte_size.h), bandwidths are bytes per second
// (the same grammar: "25GB" means 25e9 B/s), times seconds. docs/policy.md "Transfer bound".
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>
#include <string>

#include "chameleon/ipc/byte_size.h"
#include "chameleon/policy/transfer_bound.h"

namespace {

/// A CLI11 option parsed by the one size grammar.
CLI::Option* AddSize(CLI::App& app, const std::string& name, std::uint64_t* out,
                     const std::string& help) {
  return app.add_option_function<std::string>(
      name,
      [out, name](const std::string& text) {
        const chameleon::ipc::ByteSize size = chameleon::ipc::ParseByteSize(text);
        if (!size)
          throw CLI::ValidationError(name, std::string("expected a byte size: ") + size.error);
        *out = size.bytes;
      },
      help);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chameleon-bound: the transfer bound T_b of one workload at one device limit"};
  chameleon::policy::TransferBoundInput in;
  std::uint64_t out_bw = 0, in_bw = 0;
  AddSize(app, "--peak", &in.peak_bytes, "the unlimited step's peak device memory")->required();
  AddSize(app, "--limit", &in.limit_bytes, "the device limit")->required();
  AddSize(app, "--optimizer-bytes", &in.optimizer_state_bytes,
          "optimizer-state bytes P (0 for traces)");
  AddSize(app, "--out-bw", &out_bw, "device-to-host bandwidth, bytes per second")->required();
  AddSize(app, "--in-bw", &in_bw, "host-to-device bandwidth, bytes per second")->required();
  app.add_option("--unlimited-s", in.unlimited_s, "the unlimited step time, seconds")->required();
  app.add_option("--forward-s", in.forward_s, "the unlimited step's time up to its peak")
      ->required();
  AddSize(app, "--largest-op", &in.largest_op_bytes, "the largest working set of a single op");
  AddSize(app, "--reserve", &in.reserve_bytes, "the executor's reserve on the device");
  CLI11_PARSE(app, argc, argv);
  in.out_bytes_per_s = double(out_bw);
  in.in_bytes_per_s = double(in_bw);

  const chameleon::policy::TransferBound b = chameleon::policy::ComputeTransferBound(in);
  nlohmann::json j{{"status", chameleon::policy::ToString(b.status)},
                   {"excess_bytes", b.excess_bytes},
                   {"across_bytes", b.across_bytes}};
  if (b.status == chameleon::policy::TransferBoundStatus::kOk) {
    j["bound_s"] = b.bound_s;
    j["link_s"] = b.link_s;
    j["phases_s"] = b.phases_s;
    j["relative_throughput"] = b.relative_throughput;
  }
  std::cout << j.dump() << "\n";
  if (b.status == chameleon::policy::TransferBoundStatus::kInvalid) {
    std::fprintf(stderr,
                 "chameleon-bound: inputs out of range (bandwidths must be > 0, "
                 "0 <= forward-s <= unlimited-s)\n");
    return 2;
  }
  return 0;
}
