// AgentStatus: the agent's part in the status pages (docs/status.md) behind
// four calls from its loop — the StatusPublisher (this node's records, node rank 0's history and
// metric relay) and, with --http-port, the agent's own pages (status_http.hpp).
//
// Thread safety: call from the agent's thread.
#pragma once

#include <memory>
#include <string>

#include "launcher/recovery/restart_policy.hpp"
#include "launcher/agent/supervisor.hpp"
#include "launcher/config/launch_config.hpp"
#include "launcher/status/status_http.hpp"
#include "launcher/status/status_publisher.hpp"

namespace ddp {

class AgentStatus {
 public:
  // Starts the publisher (a store connection of its own, idle unless something changes) and,
  // with --http-port, the pages; logs their address. Throws NetworkError when that port cannot
  // be bound. Without `connect` (no second store connection) it does nothing. `onStraggler`:
  // StatusPublisherSettings::onStraggler.
  void start(const LaunchConfig& config, const std::string& runId, const std::string& host,
             const StoreConnector& connect, Supervisor& supervisor,
             std::function<void(const StragglerFlagged&, Store&)> onStraggler = {});
  // This node is in `round` (workerStoreAddr:workerStorePort: the worker store it hosts, else
  // port 0).
  void beginGeneration(const RendezvousResult& round, const std::string& workerStoreAddr,
                       uint16_t workerStorePort);
  // The restart policy's decision `d` ends the generation when it rejoins or exits.
  void generationEnded(const GenerationOutcome& outcome, const Decision& d,
                       const RendezvousEvent& last);
  // The rendezvous ended the generation (`how`) and its workers went on in place into the next.
  void generationMovedOn(const RendezvousEvent& how);
  // The job ended for this agent: publish what is pending, stop. Blocks briefly (publisher).
  void finish();

 private:
  std::unique_ptr<StatusPublisher> publisher_;
  std::unique_ptr<AgentStatusPages> pages_;
};

}  // namespace ddp
