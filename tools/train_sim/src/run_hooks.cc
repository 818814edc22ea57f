#include "run_hooks.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace chameleon::train_sim {
namespace {

/// The growth is taken in pieces of at most this size, as a framework's allocator takes segments:
/// a runtime that must make room can move the older pieces while the newer are allocated.
constexpr std::uint64_t kPieceBytes = 8ull << 20;

/// The byte piece `i` is filled with (never 0, so a zeroed piece does not pass).
unsigned char PieceByte(std::size_t i) { return static_cast<unsigned char>(1 + i % 255); }

bool Exists(const std::string& path) { return !path.empty() && ::access(path.c_str(), F_OK) == 0; }

}  // namespace

bool RunHooks::StopBefore(int /*step*/) const { return Exists(stop_file_); }

void RunHooks::MaybeGrow(int step) {
  if (grown_ || grow_bytes_ == 0 || !Exists(grow_file_)) return;
  grown_ = true;
  std::vector<unsigned char> pattern;
  for (std::uint64_t done = 0; done < grow_bytes_;) {
    const std::uint64_t bytes = std::min(kPieceBytes, grow_bytes_ - done);
    CUdeviceptr ptr = 0;
    Check(api_, api_.cuMemAlloc(&ptr, bytes),
          "cuMemAlloc(--grow-bytes, " + std::to_string(bytes) + ")");
    pieces_.push_back(ptr);
    // Written, as memory a job takes is: on a lazily backed device untouched bytes cost nothing.
    pattern.assign(bytes, PieceByte(pieces_.size() - 1));
    Check(api_, api_.cuMemcpyHtoD(ptr, pattern.data(), bytes), "cuMemcpyHtoD(--grow-bytes)");
    done += bytes;
  }
  std::printf("grew %llu at step %d\n", static_cast<unsigned long long>(grow_bytes_), step);
  std::fflush(stdout);
}

void RunHooks::Verify() const {
  std::vector<unsigned char> back;
  std::uint64_t left = grow_bytes_;
  for (std::size_t i = 0; i < pieces_.size(); ++i) {
    back.resize(std::min(kPieceBytes, left));
    left -= back.size();
    Check(api_, api_.cuMemcpyDtoH(back.data(), pieces_[i], back.size()),
          "cuMemcpyDtoH(--grow-bytes)");
    if (std::any_of(back.begin(), back.end(), [&](unsigned char b) { return b != PieceByte(i); })) {
      throw std::runtime_error("--grow-bytes: piece " + std::to_string(i) + " lost its contents");
    }
  }
}

void RunHooks::Release() {
  for (CUdeviceptr ptr : pieces_) api_.cuMemFree(ptr);
  pieces_.clear();
}

}  // namespace chameleon::train_sim
