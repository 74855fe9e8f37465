// The agent's state and steps, shared by launcher/agent/agent.cpp (construction, the generation loop,
// store failover) and launcher/agent/agent_outcome.cpp (what a generation's outcome leads to: the
// restart policy's decisions, the rendezvous calls they name, the job's end). Only run() in
// launcher/agent/agent.hpp uses it.
//
// Thread safety: one Agent per process, driven from the main thread (see agent.hpp).
#pragma once

#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "launcher/agent/agent_status.hpp"
#include "launcher/agent/bad_node_exclusion.hpp"
#include "launcher/recovery/in_place_recovery.hpp"
#include "launcher/recovery/restart_policy.hpp"
#include "launcher/agent/supervisor.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/numa/numa_setup.hpp"
#include "launcher/preflight/preflight.hpp"
#include "launcher/rendezvous/rendezvous_setup.hpp"
#include "launcher/rendezvous/store_failover.hpp"
#include "launcher/failures/failure_summary.hpp"
#include "launcher/workers/log_layout.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/server/store_server.hpp"

namespace ddp::detail {

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
  // What a rendezvous call the policy asked for led to: the policy's next decision, and the event
  // the call returned (how the round ended, the answer to a report) when it returned one.
  struct Performed {
    Decision next;
    std::optional<RendezvousEvent> event;
  };
  Performed perform(const Decision& d, const RendezvousResult& round,
                    const GenerationOutcome& outcome);
  PolicyInput inputFor(Situation situation, const RendezvousResult& round,
                       const RendezvousEvent* end = nullptr) const;
  PolicyInput inputFor(const GenerationOutcome& outcome, const RendezvousResult& round);
  // The verdict on the job's failures with this generation's (verdict.hpp): one store call
  // reading the records; "" when none, when --verdict-after is 0 or the records cannot be read.
  std::string judge(const GenerationOutcome& outcome, const RendezvousResult& round);
  std::string verdictInPlace(const std::vector<WorkerFailure>& failures);
  // Bad-node exclusion (bad_node_exclusion.cpp). In-place recovery's hook (helper thread): counts
  // a failure about to be replaced against the node; the reason of a granted claim, else "".
  std::string leaveInstead(const std::vector<WorkerFailure>& failures);
  // --exclude-stragglers (the status publisher's thread, its store connection `store`): claims to
  // leave for a rank of this node flagged as a straggler; granted, it ends the generation so that
  // the node sits out (once per generation).
  void leaveForStraggler(const StragglerFlagged& flagged, Store& store);
  // Leaves the job for --exclude-cooldown (`why`), then rejoins.
  Step sitOut(const RendezvousResult& round, const std::string& why);
  // Strict preflight failed with nodes to blame: a blamed node claims to leave (and sits out when
  // granted), the others learn whether every blamed node left and then rejoin without them.
  // nullopt: the round fails as without exclusion.
  std::optional<Step> excludeAfterPreflight(const RendezvousResult& round,
                                            const PreflightFailed& failed);
  int reportJobEnded(const JobEnded& ended);
  // `round`: this node's last round (nullptr: it joined none); `local`: its workers that did not
  // exit 0 in that round; `reason`: why the job ended, when known; `verdictExitCode`: non-zero
  // when an agent's verdict ended it (`reason` is the verdict).
  int jobFailed(const std::vector<WorkerFailure>& local, const RendezvousResult* round,
                const std::string& reason = "", int verdictExitCode = 0);
  // The rendezvous store was lost (`detail`): prints this node's summary; returns the exit code
  // (`exitCode`, or a local worker's when its own failure explains the end).
  int storeLost(const std::vector<WorkerFailure>& local, const RendezvousResult& round,
                const std::string& detail, int exitCode);
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
  // --restart-scope=failed: the running generation, for replacement processes.
  RendezvousResult running_;
  WorkerStoreAddress runningStore_;
  // A round joined in place (in_place_round.cpp): node rank 0's new worker store until adopted,
  // and the one the workers are leaving, kept until the next round.
  std::unique_ptr<StoreServerThread> pendingWorkerStore_;
  std::unique_ptr<StoreServerThread> previousWorkerStore_;
  BadNodeExclusion exclusion_;
  InPlaceRecovery inPlace_;  // after the supervisor: its helper thread posts to it
  WorkerSpec replacementSpec(int localRank, int64_t quorum) const;
  // What standby processes start from (--standby-workers), or nullopt (`why` set when it says more
  // than --standby-workers 0).
  std::optional<StandbyPlan> standbyPlan(std::string& why) const;
  std::vector<WorkerSpec> specsFor(const RendezvousResult& round, const WorkerStoreAddress& store);
  NextInPlace nextRoundInPlace();
  void holdForTest(const RendezvousResult& round);
  void preflightInPlace(const InPlaceRound& next);
  std::vector<WorkerSpec> adoptInPlace(const InPlaceRound& next);
};

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

}  // namespace ddp::detail
