#include "launcher/agent/agent_status.hpp"

#include "rendezvous/base/logging.hpp"

namespace ddp {

void AgentStatus::start(const LaunchConfig& config, const std::string& runId,
                        const std::string& host, const StoreConnector& connect,
                        Supervisor& supervisor,
                        std::function<void(const StragglerFlagged&, Store&)> onStraggler) {
  if (!connect) return;
  StatusPublisherSettings settings;
  settings.runId = runId;
  settings.host = host;
  settings.maxRestarts = config.maxRestarts;
  settings.connect = connect;
  settings.stragglers = supervisor.stragglers();  // null unless --straggler-threshold
  settings.onStraggler = std::move(onStraggler);
  publisher_ = std::make_unique<StatusPublisher>(std::move(settings));
  supervisor.observeWorkers(
      [this](const std::vector<WorkerState>& states) { publisher_->workers(states); });
  if (config.httpPort == 0) return;
  HttpServerOptions http;
  http.host = config.httpHost;
  http.port = config.httpPort == LaunchConfig::kHttpPortAuto
                  ? 0
                  : static_cast<uint16_t>(config.httpPort);
  http.name = "agent status";
  pages_ = std::make_unique<AgentStatusPages>(connect, runId, host, http);
  logger("agent")->info("status page at http://{}/ (also /status and /metrics)",
                        pages_->address());
}

void AgentStatus::beginGeneration(const RendezvousResult& round,
                                  const std::string& workerStoreAddr, uint16_t workerStorePort) {
  if (publisher_) publisher_->beginGeneration(round, workerStoreAddr, workerStorePort);
}

void AgentStatus::generationEnded(const GenerationOutcome& outcome, const Decision& d,
                                  const RendezvousEvent& last) {
  if (!publisher_) return;
  switch (d.action) {
    case Action::kRejoin:
      publisher_->endGeneration(endName(last.kind), last.detail);
      return;
    case Action::kSitOut:
      publisher_->endGeneration("excluded", d.why);
      return;
    case Action::kSucceed:
      publisher_->endGeneration("succeeded", "every worker exited 0");
      return;
    case Action::kJobFailed:
      publisher_->endGeneration("job failed", last.detail);
      return;
    case Action::kExit:
      if (outcome.kind == OutcomeKind::kSignalled) {
        publisher_->endGeneration("signal", "ddprun got " + signalName(outcome.signal));
      } else {
        publisher_->endGeneration(endName(last.kind), last.detail);
      }
      return;
    case Action::kAwaitExitBarrier:  // a rendezvous call comes first; the generation has not
    case Action::kAwaitPeerCause:    // ended yet
    case Action::kReportFailure:
    case Action::kReportVerdict:
    case Action::kFailOver:  // the store moves; the status pages' store with it
      return;
  }
}

void AgentStatus::generationMovedOn(const RendezvousEvent& how) {
  if (publisher_) {
    publisher_->endGeneration(endName(how.kind),
                              how.detail + " (the workers went on in place: nothing restarted)");
  }
}

void AgentStatus::finish() {
  if (publisher_) publisher_->finish();
}

}  // namespace ddp
