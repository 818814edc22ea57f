#include "swap_e2e_util.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdint>
#include <fstream>
#include <limits>
#include <regex>
#include <sstream>

#include "stats_file_reader.h"

extern char** environ;

namespace chameleon::daemon::testing {
namespace {

bool Inherited(const std::string& entry) {
  for (const char* prefix : {"LD_PRELOAD=", "LD_LIBRARY_PATH=", "CHAMELEON_", "SIMGPU_"}) {
    if (entry.rfind(prefix, 0) == 0) return false;
  }
  return true;
}

}  // namespace

Child Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
            const std::string& out_path, const std::string& err_path) {
  std::vector<std::string> all_env = env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (Inherited(*e)) all_env.emplace_back(*e);
  }
  std::vector<char*> argv_c, env_c;
  for (const auto& a : argv) argv_c.push_back(const_cast<char*>(a.c_str()));
  for (const auto& e : all_env) env_c.push_back(const_cast<char*>(e.c_str()));
  argv_c.push_back(nullptr);
  env_c.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  Child child{-1, out_path, err_path};
  if (posix_spawn(&child.pid, argv_c[0], &actions, nullptr, argv_c.data(), env_c.data()) != 0) {
    child.pid = -1;
  }
  posix_spawn_file_actions_destroy(&actions);
  return child;
}

int Wait(const Child& child) {
  int status = -1;
  if (child.pid > 0) waitpid(child.pid, &status, 0);
  return status;
}

bool Exited(const Child& child, int* status) {
  return child.pid > 0 && waitpid(child.pid, status, WNOHANG) == child.pid;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

RunOutput Finish(const Child& child) {
  RunOutput r;
  r.status = Wait(child);
  r.out = ReadFile(child.out_path);
  r.err = ReadFile(child.err_path);
  return r;
}

std::vector<std::string> ResultLines(const std::string& out) {
  std::vector<std::string> lines;
  // The toy trainer's losses, the model-shaped trainer's digests, the replayer's iterations.
  static const std::regex step("^(step [0-9]+ (loss|digest) [^ ]+|iteration [0-9]+)");
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, step)) lines.push_back(m[1]);
  }
  return lines;
}

std::string Checksum(const std::string& out) {
  std::smatch m;
  static const std::regex re("\nchecksum ([0-9a-f]{16})");
  return std::regex_search(out, m, re) ? m[1].str() : "";
}

std::uint64_t Number(const std::string& text, const std::string& key) {
  std::smatch m;
  const std::regex re("(^|\n)" + key + " ([0-9]+)");
  return std::regex_search(text, m, re) ? std::stoull(m[2]) : 0;
}

std::uint64_t HighWater(const std::string& err) {
  std::smatch m;
  // The trainer's own line, or simgpu's SIMGPU_REPORT=1 line (the replayer prints none).
  static const std::regex re("(high-water|physical peak) ([0-9]+)");
  return std::regex_search(err, m, re) ? std::stoull(m[2])
                                       : std::numeric_limits<std::uint64_t>::max();
}

std::map<std::string, std::uint64_t> ExecutorStats(const std::string& stats_path) {
  return shim::testing::ExitTotals(shim::testing::ReadStatsFile(stats_path));
}

std::vector<Boundary> Boundaries(const std::string& stats_path) {
  std::vector<Boundary> result;
  for (const shim::testing::StatsRecord& r :
       shim::testing::IterationRecords(shim::testing::ReadStatsFile(stats_path))) {
    result.push_back({r.iteration, r.generation_in_force, r.totals.at("swap_out_bytes"),
                      r.totals.at("swap_in_bytes")});
  }
  return result;
}

std::vector<int> Shifts(const std::string& out) {
  std::vector<int> steps;
  static const std::regex re("shift at step ([0-9]+)");
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end; ++it) {
    steps.push_back(std::stoi((*it)[1]));
  }
  return steps;
}

}  // namespace chameleon::daemon::testing
