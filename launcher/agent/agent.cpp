#include "launcher/agent/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <future>
#include <variant>

#include "launcher/agent/detail/agent_impl.hpp"
#include "launcher/config/run_id.hpp"
#include "launcher/rendezvous/admission_probe.hpp"
#include "launcher/rendezvous/store_access.hpp"
#include "rendezvous/base/local_address.hpp"

namespace ddp {
namespace {

constexpr const char* kDefaultPrefix = "[{role}{rank}]:";

std::string resolveRunId(const LaunchConfig& config) {
  if (!(config.standalone && config.rdzvId == "none")) return config.rdzvId;
  return randomRunId();
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
  s.terminal = detectTerminal(s.consoleOut, s.consoleErr);
  return s;
}

// How long a node asks node rank 0's worker store whether it serves it (one connection): the
// preflight port probe's budget, which it overlaps.
constexpr std::chrono::seconds kAdmissionProbeBudget{2};

// A node that node rank 0's worker store refuses says so in its own log: its workers would only
// see "Broken pipe" (the store closes a refused connection before reading it). Asked on a thread
// of its own while the preflight checks run (a port that drops connections costs no extra time);
// the future returned joins it. Node rank 0 asks nothing.
std::future<void> checkAdmission(const RendezvousResult& round, const WorkerStoreAddress& store,
                                 std::shared_ptr<spdlog::logger> log) {
  if (round.nodeRank == 0) return {};
  return std::async(std::launch::async, [store, log] {
    const AdmissionProbe probe = probeAdmission(store.addr, store.port, kAdmissionProbeBudget);
    if (probe.outcome != AdmissionOutcome::kRefused) return;
    const bool v6 = store.addr.find(':') != std::string::npos;
    log->error("{}", refusalAdvice(probe, (v6 ? "[" + store.addr + "]" : store.addr) + ":" +
                                              std::to_string(store.port)));
  });
}

HangSettings hangSettings(const LaunchConfig& config) {
  HangSettings h;
  h.timeout = config.hangTimeout;
  h.fileTimer = config.fileTimer;
  h.timerFile = config.timerFile;
  if (config.stragglerThreshold > 0) {  // docs/running.md "Straggler detection"
    h.stragglers = std::make_shared<StragglerWatch>(
        StragglerRule{config.stragglerThreshold, config.stragglerWindow});
  }
  return h;
}

}  // namespace

namespace detail {

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
                  config.explicitOptions.contains("signals_to_handle"), hangSettings(config)),
      exclusion_(config, host_),
      inPlace_(config.restartScope, config.nprocPerNode,
               InPlaceHooks{
                   .supervisor = supervisor_,
                   .rendezvous = [this]() -> Rendezvous& { return *rdzv_; },
                   .replacementSpec = [this](int lr, int64_t q) { return replacementSpec(lr, q); },
                   .host = host_,
                   .maxRestarts = config.maxRestarts,
                   .nextRound = [this] { return nextRoundInPlace(); },
                   .afterBoard = [this](const InPlaceRound& n) { preflightInPlace(n); },
                   .adopt = [this](const InPlaceRound& n) { return adoptInPlace(n); },
                   .standbySpec = [this](std::string& why) { return standbyPlan(why); },
                   .leaveInstead = [this](const std::vector<WorkerFailure>& failures) {
                     return leaveInstead(failures);
                   },
                   .verdictInstead = [this](const std::vector<WorkerFailure>& failures) {
                     return verdictInPlace(failures);
                   }}) {
  self_.host = host_;
  self_.addr = advertisedAddr_;
  // Node rank 0's worker store serves these too: a multi-NIC node may reach it from another
  // interface than the one it advertises (store_access.hpp).
  self_.interfaceAddrs = interfaceAddresses(kMaxInterfaceAddrs);
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
                supervisor_,
                config.excludeStragglers
                    ? [this](const StragglerFlagged& f, Store& store) { leaveForStraggler(f, store); }
                    : std::function<void(const StragglerFlagged&, Store&)>{});
  if (envBuilder_.ompThreadsDefaulted()) {
    log_->info("OMP_NUM_THREADS=1 for each worker (it is unset and there are {} workers per node)",
               config.nprocPerNode);
  }
}

int Agent::run() {
  for (const auto& note : config_.notes) log_->info("{}", note);
  for (const auto& warning : config_.warnings) log_->warn("{}", warning);
  log_->info("run id {}, {} worker(s) per node, rendezvous store {}, logs in {}{}", runId_,
             config_.nprocPerNode, rdzvStore_.description, logs_.runDir(),
             logs_.isTemporary() ? " (a temp dir: removed at exit unless it must be kept)" : "");
  rdzv_->watch([this](const RendezvousEvent& event) { supervisor_.postRendezvousEvent(event); });
  while (true) {
    std::string lost;
    try {
      NextResult next = blocking([this] { return rdzv_->next(); });
      if (auto* ended = std::get_if<JobEnded>(&next)) return reportJobEnded(*ended);
      if (exclusion_.takeReturn()) {
        const auto& round = std::get<RendezvousResult>(next);
        rdzv_->exclusions().markReturned(round.generation);
        log_->info("this node is back in the job after its cooldown: generation {}, node rank {} "
                   "of {}", round.generation, round.nodeRank, round.nodeCount);
      }
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
  previousWorkerStore_.reset();
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
  std::future<void> admission = checkAdmission(round, store, log_);
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
    if (auto left = excludeAfterPreflight(round, *failed)) return *left;
    return Exit{preflightFailed(round, failed->line)};
  }
  if (admission.valid()) blocking([&] { admission.get(); return true; });
  if (agentHosted) {
    auto standbys = blocking([&] { return readStandbys(*rdzv_, round, failoverBound(settings_)); });
    if (auto* ended = std::get_if<RoundEnded>(&standbys)) {
      return endedBeforeStart(round, ended->event, "while reading the store's standby list");
    }
    failover_.setStandbys(std::get<std::vector<Standby>>(std::move(standbys)));
  }
  logs_.beginGeneration(round.generation, round.nodeRank);
  running_ = round;
  runningStore_ = store;
  inPlace_.beginGeneration(round, store);  // quorum 0 on the board before any worker reads it
  std::vector<WorkerSpec> specs = specsFor(round, store);
  log_->debug("generation {}: node {} of {}, ranks {}..{} of {}, worker store {}:{}",
              round.generation, round.nodeRank, round.nodeCount, round.baseRank,
              round.baseRank + config_.nprocPerNode - 1, round.worldSize, store.addr, store.port);
  exclusion_.beginGeneration();
  const GenerationOutcome outcome =
      supervisor_.runGeneration(std::move(specs), logs_, round.generation);
  inPlace_.endGeneration();
  previousWorkerStore_.reset();
  for (const auto& f : outcome.failures) {  // a hung worker's stacks outlive a temporary log dir
    if (!f.stacksFile.empty() && logs_.contains(f.stacksFile)) logs_.keep();
  }
  // Rounds formed in place while the workers ran (in_place_round.cpp) moved running_ on.
  return follow(running_, outcome);
}

// A new process for local rank `localRank` of the running generation, replacing a failed one in
// quorum `quorum`: the same env contract, its own error file, its state from a peer.
WorkerSpec Agent::replacementSpec(int localRank, int64_t quorum) const {
  const std::string errorFile =
      logs_.errorFilePath(running_.generation, localRank) + ".q" + std::to_string(quorum);
  WorkerSpec spec = envBuilder_.build(localRank, running_, runningStore_, errorFile);
  spec.binding = numa_.bindingFor(localRank);
  inPlace_.addEnvironment(spec.env, localRank);
  spec.env["DDP_STATE_FROM_PEER"] = "1";
  return spec;
}

std::optional<StandbyPlan> Agent::standbyPlan(std::string& why) const {
  if (config_.standbyWorkers == 0) return std::nullopt;
  if (config_.virtualLocalRank) {
    why = "--virtual-local-rank gives each worker a CUDA_VISIBLE_DEVICES of its own";
    return std::nullopt;
  }
  if (numa_.bindingFor(0)) {
    why = "--numa-binding binds each worker before it starts, and a standby waits unbound";
    return std::nullopt;
  }
  return StandbyPlan{replacementSpec(0, 0), config_.standbyWorkers};
}

}  // namespace detail

int run(const LaunchConfig& config) {
  ::signal(SIGPIPE, SIG_IGN);  // a closed console must not kill the agent
  detail::Agent agent(config);
  return agent.run();
}

}  // namespace ddp
