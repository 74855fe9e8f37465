#include "launcher/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <time.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <variant>

#include "launcher/failure_summary.hpp"
#include "launcher/job_summary.hpp"
#include "launcher/log_layout.hpp"
#include "launcher/numa_setup.hpp"
#include "launcher/preflight.hpp"
#include "launcher/rendezvous_setup.hpp"
#include "launcher/store_access.hpp"
#include "launcher/restart_policy.hpp"
#include "launcher/store_failover.hpp"
#include "launcher/agent_status.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/worker_env_builder.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/server/store_server.hpp"

namespace ddp {
namespace {

constexpr const char* kDefaultPrefix = "[{role}{rank}]:";

std::string hostName() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string resolveRunId(const LaunchConfig& config) {
  if (!(config.standalone && config.rdzvId == "none")) return config.rdzvId;
  std::random_device rd;
  std::ostringstream id;
  id << std::hex << rd() << rd();
  return id.str();
}

bool usesFiles(const StreamSpec& spec) {
  if (spec.all != StdStreams::kNone) return true;
  for (const auto& [rank, streams] : spec.perRank) {
    if (streams != StdStreams::kNone) return true;
  }
  return false;
}

GroupSettings groupSettings(const LaunchConfig& config, const std::string& host) {
  GroupSettings s;
  s.host = host;
  s.role = config.role;
  s.prefixTemplate = config.logPrefix.empty() ? kDefaultPrefix : config.logPrefix;
  s.redirects = config.redirects;
  s.tee = config.tee;
  s.localRanksFilter = config.localRanksFilter;
  s.shutdownTimeout = config.shutdownTimeout;
  s.hang.timeout = config.hangTimeout;
  s.hang.fileTimer = config.fileTimer;
  s.hang.timerFile = config.timerFile;
  return s;
}

std::string wallTime(int64_t unixMs) {
  const time_t seconds = static_cast<time_t>(unixMs / 1000);
  tm local{};
  char buf[64] = "";
  if (unixMs > 0 && localtime_r(&seconds, &local) != nullptr) {
    strftime(buf, sizeof(buf), " at %Y-%m-%d %H:%M:%S %Z", &local);
  }
  return buf;
}

// Everything one agent holds for the job's lifetime. Declaration order is destruction order in
// reverse: the supervisor (and its workers) go before the stores they talk to.
class Agent {
 public:
  explicit Agent(const LaunchConfig& config);
  // Stops the rendezvous callbacks before the supervisor they post to goes away.
  ~Agent() {
    if (rdzv_) rdzv_->stopWatching();
  }
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  int run();

 private:
  // What one generation leads to: join the next round, or exit with a code.
  struct Rejoin {};
  struct Exit {
    int code = 0;
  };
  // The rendezvous store was lost with the agent hosting it (`why`): fail over, then rejoin.
  struct FailOver {
    std::string why;
  };
  using Step = std::variant<Rejoin, Exit, FailOver>;

  Step runGeneration(const RendezvousResult& round);
  // The round ended before this node started its workers (`when`: at which step).
  Step endedBeforeStart(const RendezvousResult& round, const RendezvousEvent& event,
                        const char* when);
  int preflightFailed(const RendezvousResult& round, const std::string& line);
  std::variant<WorkerStoreAddress, RoundEnded> prepareWorkerStore(const RendezvousResult& round);
  Step follow(const RendezvousResult& round, const GenerationOutcome& outcome);
  Decision perform(const Decision& d, const RendezvousResult& round,
                   const GenerationOutcome& outcome, RendezvousEvent& last);
  PolicyInput inputFor(Situation situation, const RendezvousResult& round,
                       const RendezvousEvent* end = nullptr) const;
  PolicyInput inputFor(const GenerationOutcome& outcome, const RendezvousResult& round) const;
  int reportJobEnded(const JobEnded& ended);
  // `round`: this node's last round (nullptr: it joined none); `local`: its workers that did not
  // exit 0 in that round; `reason`: why the job ended, when known.
  int jobFailed(const std::vector<WorkerFailure>& local, const RendezvousResult* round,
                const std::string& reason = "");
  void leaveJob();
  // Moves to the store's successor (store_failover.hpp) with a fresh Rendezvous. Throws what
  // StoreFailover::failOver() throws.
  void failOver(const std::string& why);
  template <class F>
  auto blocking(F fn);

  const LaunchConfig& config_;
  std::string host_;
  std::string runId_;
  std::shared_ptr<spdlog::logger> log_;
  NumaSetup numa_;  // resolved before anything else: a bad --numa-binding starts nothing
  LogLayout logs_;
  RendezvousStoreHandle rdzvStore_;
  StoreFailover failover_;
  ConnectorSwitch connectors_;  // the rendezvous store's connector, replaced by a failover
  // The job ends for this node (it failed or succeeded): a lost store is no longer replaced.
  bool ending_ = false;
  // MASTER_ADDR when this node has node rank 0 (see advertisedAddress()).
  std::string advertisedAddr_;
  RendezvousSettings settings_;
  NodeDescriptor self_;
  std::unique_ptr<Rendezvous> rdzv_;
  std::unique_ptr<StoreServerThread> workerStore_;
  WorkerEnvBuilder envBuilder_;
  Preflight preflight_;
  Supervisor supervisor_;
  AgentStatus status_;  // what the status pages show of this node, and --http-port
};

Agent::Agent(const LaunchConfig& config)
    : config_(config),
      host_(hostName()),
      runId_(resolveRunId(config)),
      log_(logger("agent")),
      numa_(setupNumaBinding(config.numaBinding, config.nprocPerNode)),
      logs_(config.logDir, runId_, usesFiles(config.redirects) || usesFiles(config.tee)),
      rdzvStore_(openRendezvousStore(config)),
      failover_(config),
      advertisedAddr_(advertisedAddress(config, rdzvStore_, host_)),
      settings_(rendezvousSettingsFrom(config, runId_)),
      envBuilder_(config, runId_, currentEnvironment()),
      preflight_(preflightSettingsFrom(config, host_, advertisedAddr_), processEnv),
      supervisor_(groupSettings(config, host_), config.signalsToHandle,
                  config.explicitOptions.contains("signals_to_handle")) {
  self_.host = host_;
  self_.addr = advertisedAddr_;
  self_.pid = static_cast<int>(::getpid());
  self_.localWorldSize = config.nprocPerNode;
  self_.requestedRank = config.nodeRank.value_or(-1);
  self_.role = config.role;
  self_.order = config.nodeOrder.value_or(-1);
  failover_.learnHost(rdzvStore_);
  connectors_.set(rdzvStore_.connectHeartbeat);
  rdzv_ = makeRendezvous(*rdzvStore_.store, settings_, self_, rdzvStore_.connectHeartbeat);
  for (const auto& line : numa_.lines) log_->info("{}", line);
  status_.start(config, runId_, host_,
                rdzvStore_.connectHeartbeat ? connectors_.connector() : StoreConnector{},
                supervisor_);
  if (envBuilder_.ompThreadsDefaulted()) {
    log_->info("OMP_NUM_THREADS=1 for each worker (it is unset and there are {} workers per node)",
               config.nprocPerNode);
  }
}

// Blocking rendezvous calls run beside the event loop so a signal still ends ddprun at once.
template <class F>
auto Agent::blocking(F fn) {
  return supervisor_.runBlocking(std::move(fn), [this](int signal) {
    log_->warn("received {} while waiting for the rendezvous; exiting", signalName(signal));
    logs_.cleanUp();  // _Exit skips the destructors
    spdlog::apply_all([](const std::shared_ptr<spdlog::logger>& l) { l->flush(); });
    std::_Exit(128 + signal);
  });
}

int Agent::run() {
  for (const auto& note : config_.notes) log_->info("{}", note);
  log_->info("run id {}, {} worker(s) per node, rendezvous store {}, logs in {}{}", runId_,
             config_.nprocPerNode, rdzvStore_.description, logs_.runDir(),
             logs_.isTemporary() ? " (a temp dir: removed at exit unless it must be kept)" : "");
  rdzv_->watch([this](const RendezvousEvent& event) { supervisor_.postRendezvousEvent(event); });
  while (true) {
    std::string lost;
    try {
      NextResult next = blocking([this] { return rdzv_->next(); });
      if (auto* ended = std::get_if<JobEnded>(&next)) return reportJobEnded(*ended);
      const Step step = runGeneration(std::get<RendezvousResult>(next));
      if (auto* exit = std::get_if<Exit>(&step)) return exit->code;
      if (auto* moved = std::get_if<FailOver>(&step)) lost = moved->why;
    } catch (const NetworkError& e) {
      // A store call failed: the store is gone with its host (else failOver() rethrows).
      if (!failover_.enabled() || ending_) throw;
      lost = e.what();
    }
    if (!lost.empty()) failOver(lost);
  }
}

void Agent::failOver(const std::string& why) {
  const JobSnapshot snapshot = rdzv_->snapshot();
  rdzv_->stopWatching();
  workerStore_.reset();
  rdzv_.reset();  // its heartbeat thread gives up on the lost store
  RendezvousStoreHandle moved =
      blocking([&] { return failover_.failOver(snapshot, rdzvStore_, why); });
  rdzvStore_ = std::move(moved);
  connectors_.set(rdzvStore_.connectHeartbeat);
  rdzv_ = makeRendezvous(*rdzvStore_.store, settings_, self_, rdzvStore_.connectHeartbeat);
  rdzv_->watch([this](const RendezvousEvent& event) { supervisor_.postRendezvousEvent(event); });
  log_->info("rejoining the job on the rendezvous store at {}: the lost host counts as a lost "
             "peer, no restart spent", rdzvStore_.description);
}

// Leaves the rendezvous at the end of the job. The agent hosting the rendezvous store keeps it up
// until every other node made its last call, so nobody is cut off mid-call.
void Agent::leaveJob() {
  ending_ = true;
  status_.finish();  // before the last agent deletes the job's keys
  rdzv_->leave();
  if (rdzvStore_.server) rdzv_->awaitOthersLeft(config_.rdzv.closeTimeout);
}

std::variant<WorkerStoreAddress, RoundEnded> Agent::prepareWorkerStore(
    const RendezvousResult& round) {
  workerStore_.reset();  // the previous generation's store goes, keys and all
  if (round.nodeRank != 0) {
    WorkerStoreResult published = blocking([this] { return rdzv_->workerStore(); });
    if (auto* ended = std::get_if<RoundEnded>(&published)) return *ended;
    const auto& endpoint = std::get<WorkerStoreEndpoint>(published);
    return WorkerStoreAddress{endpoint.addr, endpoint.port};
  }
  // Bound to the address workers use, serving the round's nodes only (store_access.hpp).
  std::vector<std::string> members;
  if (round.nodeCount > 1) members = blocking([this] { return rdzv_->memberAddresses(); });
  workerStore_ = std::make_unique<StoreServerThread>(
      workerStoreOptions(config_, round, advertisedAddr_, members));
  const std::string addr = workerStoreAddress(round, advertisedAddr_);
  rdzv_->publishWorkerStore(addr, workerStore_->port());
  return WorkerStoreAddress{addr, workerStore_->port()};
}

Agent::Step Agent::endedBeforeStart(const RendezvousResult& round, const RendezvousEvent& event,
                                    const char* when) {
  log_->info("generation {} ended {} ({})", round.generation, when, event.detail);
  status_.beginGeneration(round, "", 0);
  GenerationOutcome outcome;
  outcome.kind = OutcomeKind::kRendezvousEvent;
  outcome.event = event;
  return follow(round, outcome);
}

// Strict preflight failed the round: every node stops, saying which check failed where.
int Agent::preflightFailed(const RendezvousResult& round, const std::string& line) {
  log_->error("preflight failed in generation {}, no worker started: {}", round.generation, line);
  workerStore_.reset();
  leaveJob();
  return kPreflightFailedExitCode;
}

Agent::Step Agent::runGeneration(const RendezvousResult& round) {
  auto prepared = prepareWorkerStore(round);
  if (auto* ended = std::get_if<RoundEnded>(&prepared)) {
    // A peer lost, a scale-up: before node rank 0 published its worker store.
    return endedBeforeStart(round, ended->event, "before its worker store was published");
  }
  const auto& store = std::get<WorkerStoreAddress>(prepared);
  status_.beginGeneration(round, store.addr, workerStore_ ? workerStore_->port() : 0);
  // An agent-hosted store: the lowest node ranks say where the store may move (store_failover).
  const bool agentHosted = rdzvStore_.server != nullptr || failover_.enabled();
  if (agentHosted) publishStandby(*rdzv_, round, self_);
  const PreflightOutcome checked =
      blocking([&] { return preflight_.run(*rdzv_, round, store.addr, store.port); });
  if (auto* ended = std::get_if<RoundEnded>(&checked)) {
    return endedBeforeStart(round, ended->event, "during its preflight checks");
  }
  if (auto* failed = std::get_if<PreflightFailed>(&checked)) {
    return Exit{preflightFailed(round, failed->line)};
  }
  if (agentHosted) {
    auto standbys = blocking([&] { return readStandbys(*rdzv_, round, failoverBound(settings_)); });
    if (auto* ended = std::get_if<RoundEnded>(&standbys)) {
      return endedBeforeStart(round, ended->event, "while reading the store's standby list");
    }
    failover_.setStandbys(std::get<std::vector<Standby>>(std::move(standbys)));
  }
  logs_.beginGeneration(round.generation, round.nodeRank);
  std::vector<WorkerSpec> specs;
  for (int lr = 0; lr < config_.nprocPerNode; ++lr) {
    specs.push_back(envBuilder_.build(lr, round, store, logs_.errorFilePath(round.generation, lr)));
    specs.back().binding = numa_.bindingFor(lr);
  }
  log_->debug("generation {}: node {} of {}, ranks {}..{} of {}, worker store {}:{}",
              round.generation, round.nodeRank, round.nodeCount, round.baseRank,
              round.baseRank + config_.nprocPerNode - 1, round.worldSize, store.addr, store.port);
  const GenerationOutcome outcome =
      supervisor_.runGeneration(std::move(specs), logs_, round.generation);
  for (const auto& f : outcome.failures) {  // a hung worker's stacks outlive a temporary log dir
    if (!f.stacksFile.empty() && logs_.contains(f.stacksFile)) logs_.keep();
  }
  return follow(round, outcome);
}

PolicyInput Agent::inputFor(Situation situation, const RendezvousResult& round,
                            const RendezvousEvent* end) const {
  PolicyInput in;
  in.situation = situation;
  if (end != nullptr) {
    in.roundEnd = end->kind;
    in.droppedFromRound = end->roundRemoved || end->lostRank == round.nodeRank;
  }
  in.restartsUsed = round.restartsUsed;
  in.maxRestarts = config_.maxRestarts;
  in.storeFailover = failover_.enabled() && !ending_;
  return in;
}

// Asks the restart policy what the generation's outcome leads to, performing the rendezvous calls
// it names, until it says rejoin or exit.
PolicyInput Agent::inputFor(const GenerationOutcome& outcome, const RendezvousResult& round) const {
  PolicyInput in;
  switch (outcome.kind) {
    case OutcomeKind::kSucceeded:
      return inputFor(Situation::kWorkersSucceeded, round);
    case OutcomeKind::kFailed:
      in = inputFor(Situation::kWorkersFailed, round);
      in.allCommunicationFailures = allCommunicationFailures(outcome.failures);
      return in;
    case OutcomeKind::kSignalled:
      in = inputFor(Situation::kSignalled, round);
      in.signal = outcome.signal;
      return in;
    case OutcomeKind::kRendezvousEvent:
      return inputFor(Situation::kRoundEnded, round, &outcome.event);
  }
  return in;
}

Agent::Step Agent::follow(const RendezvousResult& round, const GenerationOutcome& outcome) {
  RendezvousEvent last = outcome.event;
  Decision d = decide(inputFor(outcome, round));
  while (true) {
    log_->debug("generation {}: {}", round.generation, d.why);
    status_.generationEnded(outcome, d, last);
    switch (d.action) {
      case Action::kRejoin:
        if (last.kind == RendezvousEventKind::kPeerLost && last.lostRank == round.nodeRank) {
          log_->warn("this node was declared lost in generation {} ({}); rejoining the job as a "
                     "newcomer", round.generation, last.detail);
        } else if (d.collateral) {
          log_->warn("workers failed with communication errors after generation {} ended ({}); "
                     "the failures are collateral: nothing published, no restart spent",
                     round.generation, last.detail);
        }
        return Rejoin{};
      case Action::kJobFailed:
        return Exit{jobFailed(outcome.failures, &round, last.detail)};
      case Action::kFailOver:
        return FailOver{last.detail};
      case Action::kSucceed:
        leaveJob();
        return Exit{0};
      case Action::kExit:
        if (last.kind == RendezvousEventKind::kStoreLost) {
          log_->error("lost the rendezvous store: {}", last.detail);
        }
        status_.finish();
        if (d.leave) rdzv_->leave();
        return Exit{d.exitCode};
      default:
        d = perform(d, round, outcome, last);
    }
  }
}

// Performs a rendezvous call the policy asked for; returns the policy's next decision.
Decision Agent::perform(const Decision& d, const RendezvousResult& round,
                        const GenerationOutcome& outcome, RendezvousEvent& last) {
  if (d.action == Action::kAwaitExitBarrier) {
    const auto timeout = config_.rdzvConf.exitBarrierTimeout;
    const ExitBarrierResult r = blocking([this, timeout] { return rdzv_->exitBarrier(timeout); });
    if (std::holds_alternative<AllSucceeded>(r)) {
      return decide(inputFor(Situation::kExitBarrierPassed, round));
    }
    last = std::get<RoundEnded>(r).event;
    return decide(inputFor(Situation::kRoundEnded, round, &last));
  }
  if (d.action == Action::kAwaitPeerCause) {
    const auto bound = peerCauseBound(settings_);
    log_->info("workers failed with communication errors; waiting up to {} ms for a lost peer "
               "to end generation {}", bound.count(), round.generation);
    const auto end = blocking([this, bound] { return rdzv_->awaitRoundEnd(bound); });
    if (end) last = *end;
    return decide(inputFor(Situation::kPeerCauseAwaited, round, end ? &last : nullptr));
  }
  FailureRecord record{round.generation, round.nodeRank, host_, outcome.failures};
  last = blocking([this, &record] { return rdzv_->reportFailure(toJson(record)); });
  if (last.kind == RendezvousEventKind::kRestartRequested) {
    log_->warn("workers failed in generation {}; restarting the job ({})", round.generation,
               last.detail);
  }
  return decide(inputFor(Situation::kFailureReported, round, &last));
}

int Agent::reportJobEnded(const JobEnded& e) {
  const std::string when = wallTime(e.endedAtUnixMs);
  const std::string dropped =
      "this node was dropped from the job after generation " +
      std::to_string(e.memberGeneration) +
      (e.droppedDetail.empty() ? std::string() : " (" + e.droppedDetail + ")");
  if (e.result == JobResult::kSucceeded) {
    if (e.standing == NodeStanding::kNeverMember) {
      log_->error("the job finished{} ({}) before this node became a member of a round: it ran "
                  "no worker", when, e.reason);
      return kRendezvousFailedExitCode;
    }
    if (e.standing == NodeStanding::kDropped) {
      log_->warn("{}; the job went on without it and succeeded{}: {}", dropped, when, e.reason);
    } else {
      log_->info("the job succeeded{}: {}", when, e.reason);
    }
    leaveJob();
    return 0;
  }
  if (e.result == JobResult::kUnknown) {
    log_->error("{}", e.reason);
    return kRendezvousFailedExitCode;
  }
  if (e.standing == NodeStanding::kDropped) {
    log_->warn("{}; the job went on without it and failed{}", dropped, when);
  } else if (e.standing == NodeStanding::kNeverMember) {
    log_->warn("the job failed{} before this node became a member of a round", when);
  }
  return jobFailed({}, nullptr, e.reason);
}

int Agent::jobFailed(const std::vector<WorkerFailure>& local, const RendezvousResult* round,
                     const std::string& reason) {
  ending_ = true;
  const FailedJob job{round ? std::optional<RendezvousResult>(*round) : std::nullopt, local};
  JobSummarySettings settings{host_, config_.entrypointName,
                              config_.shutdownTimeout + std::chrono::seconds(5)};
  settings.reason = reason;
  const int code = blocking([&] { return finishFailedJob(*rdzv_, job, settings, logs_); });
  leaveJob();
  return code;
}

}  // namespace

int run(const LaunchConfig& config) {
  ::signal(SIGPIPE, SIG_IGN);  // a closed console must not kill the agent
  Agent agent(config);
  return agent.run();
}

}  // namespace ddp
