// A CLI11 option that takes a byte size by the one grammar (chameleon/ipc/byte_size.h), so a
// size typed on a tool's command line means what it means in the environment and the YAML.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::cli {

/// Adds `name` to `app`, parsing its value into `*out`; a bad value is a CLI11 validation error
/// naming the option and the grammar's reason.
inline CLI::Option* AddByteSizeOption(CLI::App& app, const std::string& name, std::uint64_t* out,
                                      const std::string& help) {
  return app.add_option_function<std::string>(
      name,
      [out, name](const std::string& text) {
        const ipc::ByteSize size = ipc::ParseByteSize(text);
        if (!size)
          throw CLI::ValidationError(name, std::string("expected a byte size: ") + size.error);
        *out = size.bytes;
      },
      help);
}

}  // namespace chameleon::cli
