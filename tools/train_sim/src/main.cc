// chameleon-train-sim: a real-arithmetic transformer trainer on the CUDA driver API, the workload
// Chameleon is tested and demonstrated with on simgpu. See docs/trainer.md.
#include <cblas.h>

#include <cstdio>
#include <exception>

#include "driver.h"
#include "options.h"
#include "pipeline_trainer.h"
#include "shaped_trainer.h"
#include "trainer.h"

namespace {

// Exit codes (docs/trainer.md).
constexpr int kExitDriverError = 1;
constexpr int kExitOutOfMemory = 3;

}  // namespace

int main(int argc, char** argv) {
  using namespace chameleon::train_sim;
  Options options;
  if (const ParseResult parsed = ParseOptions(argc, argv, &options); parsed.exit_code >= 0) {
    return parsed.exit_code;
  }
  // One BLAS thread: the kernels already run on the driver's worker threads, and a fixed
  // reduction order is what makes runs bit-identical.
  openblas_set_num_threads(1);
  try {
    const DriverApi api = LoadDriver();
    if (options.model.empty()) {
      Trainer trainer(options, api);
      trainer.Run();
    } else if (options.pipelined) {
      PipelineTrainer trainer(options, api);
      trainer.Run();
    } else {
      ShapedTrainer trainer(options, api);
      trainer.Run();
    }
  } catch (const OutOfMemory& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "chameleon-train-sim: out of memory: %s\n", e.what());
    return kExitOutOfMemory;
  } catch (const DriverError& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "chameleon-train-sim: CUDA driver error: %s\n", e.what());
    return kExitDriverError;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "chameleon-train-sim: %s\n", e.what());
    return kExitDriverError;
  }
  return 0;
}
