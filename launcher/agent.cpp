#include "launcher/agent.hpp"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <random>
#include <sstream>

#include "launcher/failure_summary.hpp"
#include "launcher/job_summary.hpp"
#include "launcher/log_layout.hpp"
#include "launcher/rendezvous_setup.hpp"
#include "launcher/supervisor.hpp"
#include "launcher/worker_env_builder.hpp"
#include "rendezvous/logging.hpp"
#include "rendezvous/store_server.hpp"

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
  return s;
}

// Everything one agent holds for the job's lifetime. Declaration order is destruction order in
// reverse: the supervisor (and its workers) go before the stores they talk to.
class Agent {
 public:
  explicit Agent(const LaunchConfig& config);
  // Stops the rendezvous callbacks before the supervisor they post to goes away.
  ~Agent() { rdzv_->stopWatching(); }
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;
  int run();

 private:
  int runGeneration(const RendezvousResult& round, bool& again);
  WorkerStoreAddress prepareWorkerStore(const RendezvousResult& round);
  int onSucceeded(const RendezvousResult& round, bool& again);
  int onFailed(const RendezvousResult& round, const GenerationOutcome& outcome, bool& again);
  // `round`: this node's last round (nullptr: it joined none); `local`: its workers that did not
  // exit 0 in that round.
  int jobFailed(const std::vector<WorkerFailure>& local, const RendezvousResult* round);
  void leaveJob();
  template <class F>
  auto blocking(F fn);

  const LaunchConfig& config_;
  std::string host_;
  std::string runId_;
  std::shared_ptr<spdlog::logger> log_;
  LogLayout logs_;
  RendezvousStoreHandle rdzvStore_;
  // MASTER_ADDR when this node has node rank 0 (see advertisedAddress()).
  std::string advertisedAddr_;
  std::unique_ptr<Rendezvous> rdzv_;
  std::unique_ptr<StoreServerThread> workerStore_;
  WorkerEnvBuilder envBuilder_;
  Supervisor supervisor_;
};

Agent::Agent(const LaunchConfig& config)
    : config_(config),
      host_(hostName()),
      runId_(resolveRunId(config)),
      log_(logger("agent")),
      logs_(config.logDir, runId_, usesFiles(config.redirects) || usesFiles(config.tee)),
      rdzvStore_(openRendezvousStore(config)),
      advertisedAddr_(advertisedAddress(config, rdzvStore_, host_)),
      envBuilder_(config, runId_, currentEnvironment()),
      supervisor_(groupSettings(config, host_), config.signalsToHandle,
                  config.explicitOptions.contains("signals_to_handle")) {
  NodeDescriptor self;
  self.host = host_;
  self.addr = advertisedAddr_;
  self.pid = static_cast<int>(::getpid());
  self.localWorldSize = config.nprocPerNode;
  self.requestedRank = config.nodeRank.value_or(-1);
  self.role = config.role;
  rdzv_ = makeRendezvous(*rdzvStore_.store, rendezvousSettingsFrom(config, runId_), self,
                         rdzvStore_.connectHeartbeat);
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
  bool again = true;
  int code = 0;
  while (again) {
    again = false;
    RendezvousResult round;
    try {
      round = blocking([this] { return rdzv_->next(); });
    } catch (const JobEndedError& e) {
      if (e.succeeded()) {
        // A late agent of a job that already finished: nothing failed, nothing left to run.
        log_->info("{}; nothing left to run", e.what());
        return 0;
      }
      // The job failed elsewhere while this node was (re)joining: same summary as everywhere.
      log_->warn("{}", e.what());
      return jobFailed({}, nullptr);
    }
    code = runGeneration(round, again);
  }
  return code;
}

// Leaves the rendezvous at the end of the job. The agent hosting the rendezvous store keeps it up
// until every other node made its last call, so nobody is cut off mid-call.
void Agent::leaveJob() {
  rdzv_->leave();
  if (rdzvStore_.server) rdzv_->awaitOthersLeft(config_.rdzv.closeTimeout);
}

WorkerStoreAddress Agent::prepareWorkerStore(const RendezvousResult& round) {
  workerStore_.reset();  // the previous generation's store goes, keys and all
  if (round.nodeRank != 0) {
    auto [addr, port] = blocking([this] { return rdzv_->workerStore(); });
    return {addr, port};
  }
  StoreServerOptions options;
  options.host = config_.standalone ? "127.0.0.1" : "::";
  options.name = "worker store gen " + std::to_string(round.generation);
  workerStore_ = std::make_unique<StoreServerThread>(options);
  rdzv_->publishWorkerStore(advertisedAddr_, workerStore_->port());
  return {advertisedAddr_, workerStore_->port()};
}

int Agent::runGeneration(const RendezvousResult& round, bool& again) {
  WorkerStoreAddress store;
  try {
    store = prepareWorkerStore(round);
  } catch (const RoundEndedError& e) {
    // The round ended (a peer lost, a scale-up) before node rank 0 published its worker store.
    log_->info("{}; joining the next round", e.what());
    again = true;
    return 0;
  }
  logs_.beginGeneration(round.generation, round.nodeRank);
  std::vector<WorkerSpec> specs;
  for (int lr = 0; lr < config_.nprocPerNode; ++lr) {
    specs.push_back(envBuilder_.build(lr, round, store, logs_.errorFilePath(round.generation, lr)));
  }
  log_->debug("generation {}: node {} of {}, ranks {}..{} of {}, worker store {}:{}",
              round.generation, round.nodeRank, round.nodeCount, round.baseRank,
              round.baseRank + config_.nprocPerNode - 1, round.worldSize, store.addr, store.port);
  const GenerationOutcome outcome =
      supervisor_.runGeneration(std::move(specs), logs_, round.generation);
  switch (outcome.kind) {
    case OutcomeKind::kSucceeded:
      return onSucceeded(round, again);
    case OutcomeKind::kFailed:
      return onFailed(round, outcome, again);
    case OutcomeKind::kSignalled:
      rdzv_->leave();
      return 128 + outcome.signal;
    case OutcomeKind::kRendezvousEvent:
      if (outcome.event.kind == RendezvousEventKind::kJobFailed) {
        return jobFailed(outcome.failures, &round);
      }
      if (outcome.event.kind == RendezvousEventKind::kStoreLost) {
        log_->error("lost the rendezvous store: {}", outcome.event.detail);
        return 1;
      }
      again = true;
      return 0;
  }
  return 1;
}

int Agent::onSucceeded(const RendezvousResult& round, bool& again) {
  const auto timeout = config_.rdzvConf.exitBarrierTimeout;
  const ExitOutcome exit = blocking([this, timeout] { return rdzv_->exitBarrier(timeout); });
  switch (exit) {
    case ExitOutcome::kAllSucceeded:
      leaveJob();
      return 0;
    case ExitOutcome::kRestartRequested:
      again = true;
      return 0;
    case ExitOutcome::kJobFailed:
      return jobFailed({}, &round);
  }
  return 1;
}

int Agent::onFailed(const RendezvousResult& round, const GenerationOutcome& outcome, bool& again) {
  FailureRecord record{round.generation, round.nodeRank, host_, outcome.failures};
  const bool restart = blocking([this, &record] { return rdzv_->reportFailure(toJson(record)); });
  if (!restart) return jobFailed(outcome.failures, &round);
  log_->warn("workers failed in generation {}; restarting the job ({} of {} restarts used)",
             round.generation, round.restartsUsed + 1, config_.maxRestarts);
  again = true;
  return 0;
}

int Agent::jobFailed(const std::vector<WorkerFailure>& local, const RendezvousResult* round) {
  const FailedJob job{round ? std::optional<RendezvousResult>(*round) : std::nullopt, local};
  const JobSummarySettings settings{host_, config_.entrypointName,
                                    config_.shutdownTimeout + std::chrono::seconds(5)};
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
