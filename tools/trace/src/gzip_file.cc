// Whole-file reads through zlib's gz* interface, which inflates gzip and passes plain files
// through unchanged, so callers need not know how a trace was stored.
#include <zlib.h>

#include <filesystem>
#include <memory>
#include <string>

#include "chameleon/trace/reader.h"

namespace chameleon::trace {
namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};

// 1 MiB chunks: the shared traces inflate to ~10-30 MB, so this is a few dozen calls.
constexpr unsigned kChunk = 1u << 20;

}  // namespace

std::string ReadMaybeGzip(const std::string& path) {
  // A directory (a multi-rank trace folder) opens and then fails to read with EISDIR: say what
  // was expected instead. One file is one rank's trace.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw TraceError(path +
                     ": is a directory; give one execution trace file (one rank's "
                     ".json or .json.gz), not a folder or a set of ranks");
  }
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) throw TraceError(path + ": cannot open file");
  gzbuffer(file.get(), 256 * 1024);
  std::string out;
  for (;;) {
    const std::size_t old = out.size();
    out.resize(old + kChunk);
    const int got = gzread(file.get(), out.data() + old, kChunk);
    if (got < 0) {
      int err = 0;
      throw TraceError(path + ": read failed: " + gzerror(file.get(), &err));
    }
    out.resize(old + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  // zlib reports a stream cut short as Z_BUF_ERROR only through gzerror, after the last read.
  int err = Z_OK;
  const char* msg = gzerror(file.get(), &err);
  if (err != Z_OK) throw TraceError(path + ": corrupt or truncated gzip: " + msg);
  return out;
}

Trace ReadTrace(const std::string& path) { return ParseTrace(ReadMaybeGzip(path), path); }

}  // namespace chameleon::trace
