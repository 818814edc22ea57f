// chameleon-replay: a PyTorch execution trace as a workload on the CUDA driver (docs/replay.md).
#include <cstdio>
#include <fstream>

#include "chameleon/policy/profile_json.h"
#include "chameleon/trace/kineto.h"
#include "chameleon/trace/profile_builder.h"
#include "chameleon/trace/reader.h"
#include "options.h"
#include "replayer.h"

namespace {

using namespace chameleon;

void PrintJoin(const trace::KinetoJoinStats& s) {
  std::fprintf(stderr,
               "chameleon-replay: kineto: %zu device events (%zu kernels), %zu joined to %zu ops; "
               "cpu_ops %zu, rf_id name matches %zu, mismatches %zu\n",
               s.device_events, s.kernels, s.joined, s.ops_with_duration, s.cpu_ops,
               s.rf_id_name_match, s.rf_id_name_mismatch);
}

// The profile of step 0 with each op's device time: its recorded (Kineto) duration, else the cost
// model, the time the replay's kernel is given (the driver may add to it, never take from it).
// The working-set bound's windows need them (policy/working_set_bound.h).
void EmitProfile(const std::string& path, const trace::Trace& tr, const trace::Workload& w,
                 double iteration_s) {
  policy::Profile profile = trace::BuildProfile(tr, w, 0, iteration_s);
  const trace::Step& step = w.steps.at(0);
  for (std::uint32_t k = step.first_op; k < step.end_op; ++k) {
    profile.ops[k - step.first_op].device_s = trace::OpSeconds(w.ops[k]);
  }
  std::ofstream out(path);
  out << policy::ProfileToJson(profile, 1) << "\n";
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  replay::ReplayOptions options;
  if (const int rc = replay::ParseOptions(argc, argv, &options); rc != 0) return rc < 0 ? 0 : rc;
  trace::Trace tr;
  trace::Workload w;
  try {
    tr = trace::ReadTrace(options.trace);
    w = trace::BuildWorkload(tr);
    if (!options.kineto.empty()) PrintJoin(trace::JoinKineto(tr, options.kineto, &w));
  } catch (const trace::TraceError& e) {
    std::fprintf(stderr, "chameleon-replay: %s\n", e.what());
    return 2;
  }
  replay::Replayer replayer(options, tr, w);
  try {
    replayer.Run();
    if (!options.emit_profile.empty()) {
      EmitProfile(options.emit_profile, tr, w, replayer.first_iteration_s());
    }
  } catch (const replay::OutOfMemory& e) {
    std::fprintf(stderr, "chameleon-replay: out of memory at %s: %s\n", replayer.where().c_str(),
                 e.what());
    return 3;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "chameleon-replay: %s: %s\n", replayer.where().c_str(), e.what());
    return 1;
  }
  return 0;
}
