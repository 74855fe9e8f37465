// The agent's steps for a round joined in place (in_place_recovery.hpp: a node lost or added
// while the workers keep running): the rendezvous, the worker store and the preflight of the next
// round on InPlaceRecovery's helper thread (the agent's own thread is in the supervisor's loop, so
// nothing else uses the rendezvous meanwhile), then the agent's adoption of the round on the io
// thread.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "launcher/agent/detail/agent_impl.hpp"
#include "launcher/rendezvous/store_access.hpp"

namespace ddp::detail {

std::vector<WorkerSpec> Agent::specsFor(const RendezvousResult& round,
                                        const WorkerStoreAddress& store) {
  std::vector<WorkerSpec> specs;
  for (int lr = 0; lr < config_.nprocPerNode; ++lr) {
    specs.push_back(envBuilder_.build(lr, round, store, logs_.errorFilePath(round.generation, lr)));
    specs.back().binding = numa_.bindingFor(lr);
    inPlace_.addEnvironment(specs.back().env, lr);
  }
  return specs;
}

NextInPlace Agent::nextRoundInPlace() {
  NextResult next = rdzv_->next();
  if (auto* ended = std::get_if<JobEnded>(&next)) return NotInPlace{"the job ended: " + ended->reason};
  InPlaceRound n{std::get<RendezvousResult>(next), {}, {}};
  if (n.round.nodeRank == 0) {
    std::vector<std::string> members;
    if (n.round.nodeCount > 1) members = rdzv_->memberAddresses();
    pendingWorkerStore_ = std::make_unique<StoreServerThread>(
        workerStoreOptions(config_, n.round, advertisedAddr_, members));
    n.store = {workerStoreAddress(n.round, advertisedAddr_), pendingWorkerStore_->port()};
    holdForTest(n.round);
    rdzv_->publishWorkerStore(n.store.addr, n.store.port);
  } else {
    WorkerStoreResult published = rdzv_->workerStore();
    if (auto* ended = std::get_if<RoundEnded>(&published)) {
      return InPlaceRoundEnded{ended->event, n.round.nodeRank};
    }
    const auto& endpoint = std::get<WorkerStoreEndpoint>(published);
    n.store = {endpoint.addr, endpoint.port};
  }
  if (rdzvStore_.server != nullptr || failover_.enabled()) {
    publishStandby(*rdzv_, n.round, self_);
    auto standbys = readStandbys(*rdzv_, n.round, failoverBound(settings_));
    if (auto* ended = std::get_if<RoundEnded>(&standbys)) {
      return InPlaceRoundEnded{ended->event, n.round.nodeRank};
    }
    failover_.setStandbys(std::get<std::vector<Standby>>(std::move(standbys)));
  }
  return n;
}

// A test's hold (tests/integration/recovery_nodes_test.py, round_ended): with
// DDP_TEST_HOLD_WORKER_STORE=<file>, node rank 0 of a round joined in place publishes its worker
// store only once <file> is gone (at most 120 s) when it exists, so that a test can end the round
// in between.
void Agent::holdForTest(const RendezvousResult& round) {
  const char* file = std::getenv("DDP_TEST_HOLD_WORKER_STORE");
  if (file == nullptr || !std::filesystem::exists(file)) return;
  log_->info("generation {}: the worker store is published once {} is gone "
             "(DDP_TEST_HOLD_WORKER_STORE)", round.generation, file);
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (std::filesystem::exists(file) && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// Every node of a round reports its preflight: a newcomer's node rank 0 waits for it. The
// workers rebuild meanwhile (the board already shows the round).
void Agent::preflightInPlace(const InPlaceRound& n) {
  const PreflightOutcome checked = preflight_.run(*rdzv_, n.round, n.store.addr, n.store.port);
  if (auto* failed = std::get_if<PreflightFailed>(&checked)) throw Error(failed->line);
}

std::vector<WorkerSpec> Agent::adoptInPlace(const InPlaceRound& n) {
  previousWorkerStore_ = std::move(workerStore_);  // until the workers left it (the next round)
  workerStore_ = std::move(pendingWorkerStore_);
  running_ = n.round;
  runningStore_ = n.store;
  logs_.beginGeneration(n.round.generation, n.round.nodeRank);
  status_.generationMovedOn(n.ended);
  status_.beginGeneration(n.round, n.store.addr, workerStore_ ? workerStore_->port() : 0);
  return specsFor(n.round, n.store);
}

}  // namespace ddp::detail
