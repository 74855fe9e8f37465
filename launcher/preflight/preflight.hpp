// Preflight: the checks every agent runs at each rendezvous round, after the worker store is known
// and before any worker starts (--preflight=warn|strict|off, DDP_PREFLIGHT; default warn).
//
// Each node reports its fingerprint (preflight_probe.hpp), the free disk where checkpoints go,
// whether it could connect to the worker store (MASTER_ADDR:MASTER_PORT), and its clock offset
// from node rank 0. Node rank 0, the round's leader, prints one table (one row per node) with the
// flags of preflight_report.hpp and publishes a verdict: warn goes on, strict makes every node of
// the round stop with kPreflightFailedExitCode and one line naming the check and the node —
// unless every flag blames particular nodes (clock, gpus, port) and the agents' bad-node exclusion
// lets those leave the job for a cooldown (launcher/agent/bad_node_exclusion.hpp): then the others
// form the next round without them.
//
// The round's exchange, over Rendezvous round records (deleted with the round):
//   node r > 0                                node rank 0 (the leader)
//   p = now (steady); publish preflight-ready
//                                             wait for every preflight-ready (<= leaderWait)
//                                             publish preflight-clock = its wall clock T0
//   wait for preflight-clock (<= followerWait)
//   q = now (steady), Tr = its wall clock
//   probe the worker store port (<= portTimeout)
//   publish preflight-report                  probe its own port
//                                             wait for every preflight-report (<= leaderWait)
//                                             print the table; publish preflight-verdict
//   wait for preflight-verdict (<= followerWait)
// Clock offset without trusting any clock: the leader read T0 after seeing node r's ready, which
// node r published after p; node r's wait returned at q, after T0 was published. So T0 was read
// within [p, q] of node r's time, and offset = Tr - T0 - (q - p) / 2 with an error bound of
// (q - p) / 2 + 1 ms (the wall clocks are read in whole ms): a slow store widens the bound and
// never fakes a skew. A node whose ready the leader did not see in time gets no offset.
//
// Store traffic: O(1) round trips per node (two publishes of two round trips and two waits of a
// wait and a get: 8, plus one round-end check per wait slice), O(N) once for the leader (its
// multi-gets read N records). Time bounds: the leader waits at most 2 x leaderWait (10 s each), a
// node at most 2 x followerWait (15 s each) plus portTimeout (2 s). The fingerprint is probed
// once per agent, in the background from the agent's start (the torch probe is bounded by
// torchTimeout, 10 s; a one-node round does not wait for it). A node that gets no clock from node
// rank 0 (its --preflight is off) goes on at once in warn mode and fails in strict mode.
//
// Thread safety: construct and run() on the agent's thread; the background probe is owned and
// joined by the destructor.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <string>
#include <variant>

#include "launcher/config/launch_config.hpp"
#include "launcher/numa/nproc.hpp"
#include "launcher/preflight/preflight_report.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {

// Exit code of every node of a round that strict preflight failed (docs/running.md#exit-codes).
inline constexpr int kPreflightFailedExitCode = 4;

struct PreflightSettings {
  PreflightMode mode = PreflightMode::kWarn;
  std::string host;
  std::string addr;              // the address other nodes reach this node at
  int workers = 1;               // --nproc-per-node, for the GPU check
  std::string pythonExec;        // the entry point's interpreter; "" when it is not Python
  std::string checkpointPlace;   // preflight_probe.hpp checkpointPlace()
  std::chrono::milliseconds portTimeout{2000};
  std::chrono::milliseconds torchTimeout{10000};
  std::chrono::milliseconds leaderWait{10000};
  std::chrono::milliseconds followerWait{15000};
  std::chrono::milliseconds clockLimit{1000};
};

// The settings for `config` on host `host`, reached at `addr`.
PreflightSettings preflightSettingsFrom(const LaunchConfig& config, const std::string& host,
                                        const std::string& addr);

struct PreflightPassed {};
// strict mode and a flag, or no verdict: stop this node with kPreflightFailedExitCode.
struct PreflightFailed {
  std::string line;  // "<check>: <what, where>"
  // The node ranks every flag blames (PreflightVerdict::blamed): with bad-node exclusion they
  // may leave the job instead of failing it (docs/running.md "Bad-node exclusion").
  std::vector<int> blamed;
};
using PreflightOutcome = std::variant<PreflightPassed, PreflightFailed, RoundEnded>;

class Preflight {
 public:
  // Starts probing the fingerprint in the background unless the mode is off. Reads the test-only
  // overrides from `getenv` (preflight_probe.hpp); throws ConfigError when they are malformed.
  Preflight(PreflightSettings settings, EnvLookup getenv);
  ~Preflight();
  Preflight(const Preflight&) = delete;
  Preflight& operator=(const Preflight&) = delete;

  // Runs the round's checks (see the file comment) for `round`, whose worker store is at
  // storeAddr:storePort. Blocks within the bounds above. Returns PreflightPassed at once when the
  // mode is off, RoundEnded when the round ended meanwhile. Throws what the rendezvous throws
  // (NetworkError, TimeoutError).
  PreflightOutcome run(Rendezvous& rdzv, const RendezvousResult& round,
                       const std::string& storeAddr, uint16_t storePort);

 private:
  PreflightOutcome lead(Rendezvous& rdzv, const RendezvousResult& round, const NodeReport& own);
  PreflightOutcome follow(Rendezvous& rdzv, const RendezvousResult& round,
                          const std::string& storeAddr, uint16_t storePort);
  // No clock or verdict from the leader: strict fails, warn goes on.
  PreflightOutcome withoutLeader(const std::string& what) const;
  // `waitTorch`: wait for the torch probe (else "probing" while it runs: a one-node round has
  // nothing to compare it with, and its launch is not held up).
  NodeReport localReport(const std::string& storeAddr, uint16_t storePort, bool waitTorch);

  const PreflightSettings settings_;
  const EnvLookup getenv_;
  const std::chrono::milliseconds clockOffset_;
  std::shared_ptr<spdlog::logger> log_;
  std::string testFingerprint_;  // DDP_TEST_FINGERPRINT, checked at construction
  std::shared_future<NodeFingerprint> fingerprint_;
  std::shared_future<std::string> torch_;  // valid for a Python entry point
};

}  // namespace ddp
