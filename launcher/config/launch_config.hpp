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

#include "launcher/numa/numa_binding.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/security/tls_options.hpp"
#include "rendezvous/store/etcd_store.hpp"

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

// kEtcd is torchrun's legacy "etcd" handler, kEtcdV2 its dynamic "etcd-v2"; ddprun runs both on
// its own etcd store and rendezvous, and they differ only in the default join timeout.
enum class RdzvBackend { kStatic, kC10d, kEtcd, kEtcdV2 };

// The port a backend's endpoint gets when the text names none (static: --master-port's default).
inline int defaultPortFor(RdzvBackend backend) {
  switch (backend) {
    case RdzvBackend::kStatic: return kDefaultMasterPort;
    case RdzvBackend::kC10d: return kDefaultC10dPort;
    case RdzvBackend::kEtcd:
    case RdzvBackend::kEtcdV2: return kDefaultEtcdPort;
  }
  return kDefaultC10dPort;
}

// How the worker command was built from the positional entry point.
enum class EntrypointKind {
  kPythonScript,  // *.py or --run-path: $PYTHON_EXEC -u script args...
  kPythonModule,  // -m: $PYTHON_EXEC -u -m module args...
  kProgram,       // --no-python, or a non-.py program: run as given (PATH lookup by the spawner)
};

constexpr int kMaxStandbyWorkers = 64;

// --restart-scope: what a worker failure restarts. kAll: every worker of the job (torchrun);
// kFailed: only the failed worker, replaced in place, while every worker recovers in place through
// worker_runtime (docs/recovery.md); otherwise every worker, as kAll.
enum class RestartScope { kAll, kFailed };

// --preflight: off (no checks, no store traffic), warn (print the table and flags, go on), strict
// (a flag fails the round on every node; preflight.hpp).
enum class PreflightMode { kOff, kWarn, kStrict };

// The --rdzv-conf keys the launcher reads itself, typed and checked at start-up (the rendezvous's
// own timings are in RendezvousSettings, LaunchConfig::rdzv). One duration grammar for all: seconds
// with an optional fraction ("2.5", "2.5s") or milliseconds ("250ms"). The etcd defaults are
// EtcdStoreOptions' own.
struct RdzvConf {
  // is_host: force hosting (true) or not hosting (false) the c10d store; nullopt = decide by the
  // endpoint (this host and the port free -> host it).
  std::optional<bool> isHost;
  // read_timeout: budget of one blocking store call.
  std::chrono::milliseconds readTimeout{std::chrono::seconds(60)};
  // Derived, not a key: how long connecting to the rendezvous store may keep failing (refused, no
  // such host, no answer) before ddprun gives up: min(read_timeout, join_timeout), as torchrun's
  // store client gives up connecting after read_timeout.
  std::chrono::milliseconds connectTimeout{std::chrono::seconds(60)};
  // exit_barrier_timeout: how long an agent whose workers all succeeded waits for the other nodes.
  std::chrono::milliseconds exitBarrierTimeout{std::chrono::seconds(300)};
  // etcd: protocol ("https" when TLS is on: tls_ca given), etcd_prefix, request_timeout (one HTTP
  // request), retry_timeout (how long an op retries while no endpoint answers).
  std::string protocol = "http";
  std::string etcdPrefix = EtcdStoreOptions{}.prefix;
  std::chrono::milliseconds etcdRequestTimeout = EtcdStoreOptions{}.requestTimeout;
  std::chrono::milliseconds etcdRetryTimeout = EtcdStoreOptions{}.retryTimeout;
  // token_file, else $DDP_RDZV_TOKEN_FILE: the file whose token this agent presents to the
  // rendezvous store (ddprund --token-file) and that a store it hosts requires ("" = none). Read
  // when the store is opened; never logged.
  std::string tokenFile;
  // tls_ca, tls_cert, tls_key (torchrun's etcd names ca_cert/cacert, ssl_cert/cert,
  // ssl_cert_key/key are aliases): TLS to the rendezvous store (ddprund --tls-*, etcd https),
  // on when tls_ca is set.
  TlsClientOptions tls;
  // store_allow: addresses the stores this agent hosts (worker store, rendezvous store) serve
  // besides the job's own nodes (CIDR blocks separated by ';' or spaces, or any/loopback/local).
  AddressAllowlist storeAllow;
  // store_unverified_local=refuse|accept: when the kernel cannot say which user owns a local
  // connection to a store this agent hosts, refuse it (the default: never fail open) or judge it by
  // address alone (StoreServerOptions::trustUnknownLocalOwner).
  bool storeAcceptUnverifiedLocal = false;
};

struct LaunchConfig {
  // --nnodes N|MIN:MAX
  int minNodes = 1;
  int maxNodes = 1;
  // --nproc-per-node N|gpu|cpu|auto, resolved to a count.
  int nprocPerNode = 1;
  // --nproc-per-node as given ("4", "gpu", "cpu", "auto"), for logs.
  std::string nprocSpec = "1";
  // --rdzv-backend.
  RdzvBackend rdzvBackend = RdzvBackend::kStatic;
  // --rdzv-endpoint as given ("" = none; an empty value counts as not given).
  std::string rdzvEndpoint;
  // The resolved endpoint(s), read by everything that connects: exactly one for static (from
  // --rdzv-endpoint HOST:PORT, else --master-addr:--master-port), c10d (default port 29400;
  // localhost:29400 for one node without an endpoint) and standalone (localhost:0); the failover
  // list for etcd (default port 2379; localhost:2379 without an endpoint). Ports:
  // rendezvous/base/endpoint.hpp.
  std::vector<Endpoint> rdzvEndpoints;
  // Where rdzvEndpoints came from, for logs and errors: "--rdzv-endpoint", "PET_RDZV_ENDPOINT",
  // "--master-addr/--master-port", "Slurm", "Slurm (DDP_SLURM_PORT)", "default", "standalone".
  std::string rdzvEndpointSource = "default";
  // --rdzv-id (an empty value counts as not given). A multi-node c10d/etcd job without one takes
  // TORCHELASTIC_RUN_ID or SLURM_JOB_ID, else is a usage error; standalone gets a random uuid.
  std::string rdzvId = "none";
  // Where rdzvId came from: "--rdzv-id", "PET_RDZV_ID", "Slurm", "TORCHELASTIC_RUN_ID",
  // "SLURM_JOB_ID", "random (standalone)" or "default".
  std::string rdzvIdSource = "default";
  // The rendezvous settings, complete and resolved once: runId/minNodes/maxNodes/maxRestarts are
  // copies of rdzvId/minNodes/maxNodes/maxRestarts made at the end of parsing; the timings come
  // from --rdzv-conf over the defaults (join_timeout 900 s for static and etcd, as torchrun), and
  // heartbeatTimeout is never 0 (keep_alive_interval x keep_alive_max_attempt unless given). The
  // agent hands it to makeRendezvous() as it is.
  RendezvousSettings rdzv;
  // The launcher's own --rdzv-conf keys.
  RdzvConf rdzvConf;
  // --standalone: embedded store on a free port, random run id, one node.
  bool standalone = false;
  // --max-restarts: the job-wide budget of failure restarts (each recovery in place spends one).
  int maxRestarts = 0;
  // --restart-scope (PET_RESTART_SCOPE).
  RestartScope restartScope = RestartScope::kAll;
  // --verdict-after (DDP_VERDICT_AFTER; a ddprun addition, opt-in): the job stops with exit 87
  // instead of restarting once the same failure, or no step progress, repeats in this many
  // generations in a row while restarts are left (launcher/failures/verdict.hpp); 0 = never, the
  // default: --max-restarts is honoured exactly, as torchrun does.
  int verdictAfter = 0;
  // Bad-node exclusion (launcher/failures/failure_window.hpp; ddprun additions): a node whose
  // workers failed --exclude-after times (DDP_EXCLUDE_AFTER; 0 = never) within --exclude-window
  // (DDP_EXCLUDE_WINDOW) leaves the job for --exclude-cooldown (DDP_EXCLUDE_COOLDOWN) when the
  // round keeps min_nodes without it. Opt-in: 0 by default, as torchrun has no exclusion.
  int excludeAfter = 0;
  std::chrono::milliseconds excludeWindow{std::chrono::minutes(10)};
  std::chrono::milliseconds excludeCooldown{std::chrono::minutes(10)};
  // --standby-workers (DDP_STANDBY_WORKERS): standby processes per node under
  // --restart-scope=failed (worker_runtime/standby.hpp; launcher/workers/standby_pool.hpp).
  int standbyWorkers = 1;
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
  // --log-prefix template in ddprun's {name} syntax (log_prefix.hpp: {rank} {local_rank} {role}
  // {host} {pid} {node_rank} {restart_count}), or torchrun's template translated into it
  // (default "[{role}{rank}]:").
  std::string logPrefix = "[{role}{rank}]:";
  // --signals-to-handle (signal numbers), forwarded to workers.
  std::vector<int> signalsToHandle;
  // --shutdown-timeout: grace between the forwarded signal and SIGKILL.
  std::chrono::milliseconds shutdownTimeout{std::chrono::seconds(30)};
  // --hang-timeout: a worker without progress this long is a failure of that worker, its stacks
  // taken first (0 = off; else at least 1 s).
  // docs/running.md#hang-detection---hang-timeout-torchs-file-timers.
  std::chrono::milliseconds hangTimeout{0};
  // TORCHELASTIC_ENABLE_FILE_TIMER=1 (exactly "1", as torchrun): serve torch's file timers on the
  // FIFO TORCHELASTIC_TIMER_FILE names ("" = a fresh path), as torchrun's agent does.
  bool fileTimer = false;
  std::string timerFile;
  // --straggler-threshold: a rank whose compute time per step (worker_runtime's progress beats)
  // exceeds the job's median by this factor for --straggler-window is flagged as a straggler in
  // the log, /status and /metrics (0 = off; else more than 1). docs/running.md "Straggler
  // detection".
  double stragglerThreshold = 0;
  // --straggler-window: how long a rank must stay over the threshold to be flagged; also the span
  // its compute time is taken over (the median of its beats in the window). At least 1 s.
  std::chrono::milliseconds stragglerWindow{std::chrono::seconds(30)};
  // --exclude-stragglers (DDP_EXCLUDE_STRAGGLERS): a flagged straggler makes its node leave the
  // job for --exclude-cooldown, as bad-node exclusion does (launcher/agent/bad_node_exclusion.hpp).
  bool excludeStragglers = false;
  // --local-addr: the address other nodes reach this one at ("" = detect).
  std::string localAddr;
  // The hosts of the Slurm step (empty outside Slurm), in Slurm's order: a rendezvous store node
  // 0 hosts serves their addresses (launcher/rendezvous/store_access.hpp).
  std::vector<std::string> slurmHosts;
  // --master-addr / --master-port (static backend).
  std::string masterAddr = "127.0.0.1";
  std::optional<int> masterPort;
  // --node-rank (explicitly given or not), or SLURM_NODEID for a fixed-size Slurm job.
  std::optional<int> nodeRank;
  // Orders this node among those without a --node-rank (lower first), without fixing its rank:
  // SLURM_NODEID under an elastic Slurm job (min_nodes < max_nodes), so survivors of a lost node
  // are renumbered compactly in Slurm's order. nullopt = no order (host, address, pid decide).
  std::optional<int> nodeOrder;
  // --virtual-local-rank
  bool virtualLocalRank = false;
  // --numa-binding node|socket|exclusive|core-complex (kNone: workers run unbound). No PET_*
  // variable, as in torchrun. Resolved against the machine by numa_setup.hpp.
  NumaPolicy numaBinding = NumaPolicy::kNone;
  // --start-method (accepted; ddprun always spawns processes).
  std::string startMethod = "spawn";
  // --log-level (DDP_LOG_LEVEL fallback): trace, debug, info, warn, error, critical or off.
  std::string logLevel = "info";
  // --no-slurm: ignore SLURM_* even inside a Slurm step.
  bool noSlurm = false;
  // --preflight (DDP_PREFLIGHT): the checks at each rendezvous round before workers start.
  PreflightMode preflight = PreflightMode::kWarn;

  // Status pages (docs/status.md).
  // --http-port: port of this agent's /, /status and /metrics; 0 = none, kHttpPortAuto = a free
  // port (the agent logs the address either way).
  static constexpr int kHttpPortAuto = -1;
  int httpPort = 0;
  // --http-host: the address they listen on (loopback unless the user opens them wider).
  std::string httpHost = "127.0.0.1";

  // The command to run for each worker: argv[0] resolved (python -u [-m] script, or the program),
  // then the user's arguments. ${local_rank} is substituted per worker by the launcher.
  std::vector<std::string> command;
  // The entry point's name for summaries (script, module or program).
  std::string entrypointName;
  // How `command` was built.
  EntrypointKind entrypointKind = EntrypointKind::kProgram;
  // The folder put first on every worker's PYTHONPATH: where the ddprun Python package is, found
  // beside this ddprun executable (cli/python_package.hpp); "" = none found, PYTHONPATH as is.
  std::string pythonPath;

  // Accepted for torchrun compatibility, not acted upon (ddprun has one event handler and one log
  // layout): --event-log-handler, --logs-specs, --duplicate-stdout-filters,
  // --duplicate-stderr-filters.
  std::string eventLogHandler = "null";
  std::string logsSpecs;
  std::vector<std::string> duplicateStdoutFilters;
  std::vector<std::string> duplicateStderrFilters;

  // Options the user set, by torchrun dest name ("nnodes", "rdzv_endpoint", ...), whether on the
  // command line or through PET_*. Environment detection (Slurm) only fills the others.
  std::set<std::string> explicitOptions;
  // One line per decision made for the user (standalone settings, Slurm detection), for the
  // agent to log once at info level.
  std::vector<std::string> notes;
  // One line per input that was accepted but is probably not what the user meant (an unknown
  // log prefix variable), for the agent to log once at warn level at start.
  std::vector<std::string> warnings;
};

}  // namespace ddp
