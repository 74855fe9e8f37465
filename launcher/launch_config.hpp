// LaunchConfig: everything one ddprun agent needs to know, resolved from the command line
// (torchrun-compatible flags, CLI11), then PET_* environment overrides, then Slurm / Kubernetes
// detection, then defaults — in that order of precedence.
//
// Thread safety: a plain value, built once at start-up.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// Which of a worker's streams go to files (torchrun's -r/--redirects and -t/--tee values).
enum class StdStreams { kNone = 0, kStdout = 1, kStderr = 2, kBoth = 3 };

// A single value for every local rank, or a per-local-rank map ("0:1,1:3").
struct StreamSpec {
  StdStreams all = StdStreams::kNone;
  std::map<int, StdStreams> perRank;
  StdStreams forRank(int localRank) const {
    auto it = perRank.find(localRank);
    return it == perRank.end() ? all : it->second;
  }
};

enum class RdzvBackend { kStatic, kC10d, kEtcd };

struct LaunchConfig {
  // --nnodes N|MIN:MAX
  int minNodes = 1;
  int maxNodes = 1;
  // --nproc-per-node N|gpu|cpu|auto, resolved to a count.
  int nprocPerNode = 1;
  // --rdzv-backend (etcd-v2 maps to kEtcd), --rdzv-endpoint (host[:port], empty = none),
  // --rdzv-id, --rdzv-conf k=v,... (raw; typed values below).
  RdzvBackend rdzvBackend = RdzvBackend::kStatic;
  std::string rdzvEndpoint;
  std::string rdzvId = "none";
  std::map<std::string, std::string> rdzvConf;
  // --standalone: embedded store on a free port, random run id, one node.
  bool standalone = false;
  // --max-restarts: the job-wide budget of failure restarts.
  int maxRestarts = 0;
  // --monitor-interval: accepted for compatibility; ddprun does not poll.
  double monitorInterval = 0.1;
  // --role
  std::string role = "default";
  // -m/--module, --no-python, --run-path
  bool module = false;
  bool noPython = false;
  bool runPath = false;
  // --log-dir ("" = no files unless redirects/tee ask for them; then a temp dir)
  std::string logDir;
  // -r/--redirects, -t/--tee
  StreamSpec redirects;
  StreamSpec tee;
  // --local-ranks-filter: local ranks whose output reaches the console (empty = all).
  std::vector<int> localRanksFilter;
  // --log-prefix template with {rank} {local_rank} {host} {role} ("" = torchrun's "[{role}{local_rank}]:").
  std::string logPrefix;
  // --signals-to-handle (signal numbers), forwarded to workers.
  std::vector<int> signalsToHandle;
  // --shutdown-timeout: grace between the forwarded signal and SIGKILL.
  std::chrono::milliseconds shutdownTimeout{std::chrono::seconds(30)};
  // --local-addr: the address other nodes reach this one at ("" = detect).
  std::string localAddr;
  // --master-addr / --master-port (static backend).
  std::string masterAddr = "127.0.0.1";
  std::optional<int> masterPort;
  // --node-rank (explicitly given or not).
  std::optional<int> nodeRank;
  // --virtual-local-rank
  bool virtualLocalRank = false;
  // --start-method (accepted; ddprun always spawns processes).
  std::string startMethod = "spawn";
  // --log-level (DDP_LOG_LEVEL fallback)
  std::string logLevel;
  // --no-slurm: ignore SLURM_* even inside a Slurm step.
  bool noSlurm = false;

  // The command to run for each worker: argv[0] resolved (python -u [-m] script, or the program),
  // then the user's arguments. ${local_rank} is substituted per worker by the launcher.
  std::vector<std::string> command;
  // The entry point's name for summaries (script, module or program).
  std::string entrypointName;
};

}  // namespace ddp
