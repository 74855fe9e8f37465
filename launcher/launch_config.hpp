// LaunchConfig: everything one ddprun agent needs to know, resolved from the command line
// (torchrun-compatible flags, CLI11), then PET_* environment overrides, then Slurm / Kubernetes
// detection, then defaults — in that order of precedence.
//
// Thread safety: a plain value, built once at start-up.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
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

// How the worker command was built from the positional entry point.
enum class EntrypointKind {
  kPythonScript,  // *.py or --run-path: $PYTHON_EXEC -u script args...
  kPythonModule,  // -m: $PYTHON_EXEC -u -m module args...
  kProgram,       // --no-python, or a non-.py program: run as given (PATH lookup by the spawner)
};

// Typed view of the --rdzv-conf keys ddprun understands, validated by the parser (the raw map in
// LaunchConfig::rdzvConf keeps every key, including ones only another backend reads). Durations
// accept fractional seconds ("2.5") or an "ms"/"s" suffix.
struct RdzvSettings {
  // Total time for one join to complete (torch: join_timeout; "timeout" is accepted as an alias
  // when join_timeout is absent, because torchrun users pass it and c10d silently ignored it).
  std::chrono::milliseconds joinTimeout{std::chrono::seconds(600)};
  // Extra wait after min_nodes joined before the round closes (unless max_nodes is reached).
  std::chrono::milliseconds lastCallTimeout{std::chrono::seconds(30)};
  // Time allowed to mark the rendezvous closed.
  std::chrono::milliseconds closeTimeout{std::chrono::seconds(30)};
  // A participant silent this long is considered dead.
  std::chrono::milliseconds heartbeatTimeout{std::chrono::seconds(5)};
  // Heartbeat period.
  std::chrono::milliseconds keepAliveInterval{std::chrono::seconds(5)};
  // Missed heartbeats before a node is declared dead (torch's keep_alive_max_attempt).
  int keepAliveMaxAttempt = 3;
  // Store client timeout (read_timeout, must be > 0).
  std::chrono::milliseconds readTimeout{std::chrono::seconds(60)};
  // is_host: force hosting (true) or not hosting (false) the store; nullopt = decide automatically.
  std::optional<bool> isHost;
  // protocol for etcd: "http" or "https".
  std::string protocol = "http";
};

struct LaunchConfig {
  // --nnodes N|MIN:MAX
  int minNodes = 1;
  int maxNodes = 1;
  // --nproc-per-node N|gpu|cpu|auto, resolved to a count.
  int nprocPerNode = 1;
  // --nproc-per-node as given ("4", "gpu", "cpu", "auto"), for logs.
  std::string nprocSpec = "1";
  // --rdzv-backend (etcd-v2 maps to kEtcd), --rdzv-endpoint (host[:port], empty = none),
  // --rdzv-id, --rdzv-conf k=v,... (raw; typed values below).
  RdzvBackend rdzvBackend = RdzvBackend::kStatic;
  std::string rdzvEndpoint;
  std::string rdzvId = "none";
  std::map<std::string, std::string> rdzvConf;
  // The endpoint split into host and port. Port defaults: c10d 29400, etcd 2379; static uses
  // --master-addr:--master-port (29500). IPv6 hosts without brackets. Standalone: localhost:0.
  std::string rdzvHost;
  int rdzvPort = 0;
  // Typed, validated --rdzv-conf values.
  RdzvSettings rdzv;
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
  // Orders this node among those without a --node-rank (lower first), without fixing its rank:
  // SLURM_NODEID under an elastic Slurm job (min_nodes < max_nodes), so survivors of a lost node
  // are renumbered compactly in Slurm's order. nullopt = no order (host, address, pid decide).
  std::optional<int> nodeOrder;
  // --virtual-local-rank
  bool virtualLocalRank = false;
  // --start-method (accepted; ddprun always spawns processes).
  std::string startMethod = "spawn";
  // --log-level (DDP_LOG_LEVEL fallback): trace, debug, info, warn, error, critical or off.
  std::string logLevel = "info";
  // --no-slurm: ignore SLURM_* even inside a Slurm step.
  bool noSlurm = false;

  // The command to run for each worker: argv[0] resolved (python -u [-m] script, or the program),
  // then the user's arguments. ${local_rank} is substituted per worker by the launcher.
  std::vector<std::string> command;
  // The entry point's name for summaries (script, module or program).
  std::string entrypointName;
  // How `command` was built.
  EntrypointKind entrypointKind = EntrypointKind::kProgram;

  // Accepted for torchrun compatibility, not acted upon (ddprun has one event handler, one log
  // layout and no NUMA binding): --event-log-handler, --logs-specs, --numa-binding,
  // --duplicate-stdout-filters, --duplicate-stderr-filters.
  std::string eventLogHandler = "null";
  std::string logsSpecs;
  std::string numaBinding;
  std::vector<std::string> duplicateStdoutFilters;
  std::vector<std::string> duplicateStderrFilters;

  // Options the user set, by torchrun dest name ("nnodes", "rdzv_endpoint", ...), whether on the
  // command line or through PET_*. Environment detection (Slurm) only fills the others.
  std::set<std::string> explicitOptions;
  // One line per decision made for the user (standalone settings, Slurm detection), for the
  // agent to log once at info level.
  std::vector<std::string> notes;
};

}  // namespace ddp
