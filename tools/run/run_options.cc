#include "run_options.h"

#include <string_view>

#include "chameleon/ipc/byte_size.h"

namespace chameleon::run {
namespace {

// "--name=value" or "--name value": the value, or nullopt when `arg` is not this option.
// `*i` moves past a separate value; a missing value is reported by the caller.
std::optional<std::string> OptionValue(std::string_view name, int argc, const char* const* argv,
                                       int* i, bool* missing) {
  const std::string_view arg = argv[*i];
  if (arg == name) {
    if (*i + 1 >= argc) {
      *missing = true;
      return std::string();
    }
    return std::string(argv[++*i]);
  }
  if (arg.size() > name.size() && arg.substr(0, name.size()) == name && arg[name.size()] == '=')
    return std::string(arg.substr(name.size() + 1));
  return std::nullopt;
}

std::string ParseLimit(const std::string& text, RunOptions* out) {
  const ipc::ByteSize size = ipc::ParseByteSize(text);
  if (!size) return "--limit '" + text + "': " + size.error + "; expected " + ipc::kByteSizeForms;
  if (size.bytes == 0) return "--limit must be greater than 0";
  out->limit = size.bytes;
  return "";
}

}  // namespace

ParsedRunOptions ParseRunOptions(int argc, const char* const* argv) {
  ParsedRunOptions r;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg == "-h" || arg == "--help") {
      r.options.help = true;
      return r;
    }
    bool missing = false;
    if (auto v = OptionValue("--limit", argc, argv, &i, &missing)) {
      if (missing) r.error = "--limit needs a value";
      if (r.error.empty()) r.error = ParseLimit(*v, &r.options);
    } else if (auto s = OptionValue("--socket", argc, argv, &i, &missing)) {
      if (missing || s->empty()) r.error = "--socket needs a path";
      r.options.socket = *s;
    } else if (!arg.empty() && arg[0] == '-') {
      r.error = "unknown option '" + std::string(arg) + "'";
    } else {
      break;  // the command starts here (the "--" is optional when it does not look like one)
    }
    if (!r.error.empty()) return r;
  }
  for (; i < argc; ++i) r.options.command.emplace_back(argv[i]);
  if (r.options.command.empty()) r.error = "no command given";
  return r;
}

const char* RunUsage() {
  return "usage: chameleon-run [--limit BYTES] [--socket PATH] -- <command> [args...]\n"
         "  Runs <command> under Chameleon: LD_PRELOAD=libchameleon.so (appended to any\n"
         "  LD_PRELOAD), CHAMELEON_DEVICE_LIMIT from --limit (e.g. 40GiB, 512MB), and the node's\n"
         "  chameleond (--socket, else $CHAMELEON_SOCKET, else /run/chameleon/chameleond.sock) or\n"
         "  a private one started for the command and stopped after it. Exits with the command's\n"
         "  status (128+N when signal N ended it); 2 on a usage error. docs/operations.md.\n";
}

}  // namespace chameleon::run
