// RoundCloser: when an open round may close on its last call, and closing it.
//
// The rule that keeps one open round per job: round g closes on its last call only when at least
// minNodes live join records are in it AND every member of the previous formed round f has either
// joined g or is known gone — it left (r/<f>/gone), withdrew a timed-out join (r/<f>/gone), was
// declared lost (r/<f>/end names its rank), or its heartbeat counter r/<f>/hb/<rank> stood still
// for heartbeatTimeout on this agent's own clock. So running agents still stopping their workers
// (they heartbeat for f until they call next()) are waited for, and a scale-up forms one bigger
// world instead of two worlds taking turns. A round that reaches maxNodes closes at once.
//
// Closing: one compareSet election on r/<g>/closer, one add(kFrozen) that freezes the join counter
// (every earlier join drew a slot below kFrozen, every later one knows it is late), reading the
// join records (withdrawn and dead ones skipped: kWithdrawn, kDied; one WAIT and one multiGet
// per kKeysPerRequest records), then one multiSet (per kKeysPerRequest keys) of every heartbeat
// key, the roster, `formed`, every slot's assignment and, last, the result
// (rendezvous_plan.hpp); then the rounds below f are deleted (O(nodes) round trips, once, by the
// closer). The closing rule reads the previous round's
// roster once per round (incrementally after that): O(N) for the agent evaluating it, nobody else.
//
// Thread safety: one agent thread; not shared.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

struct CloseReadiness {
  bool ready = false;
  int live = 0;                      // join records seen that were not withdrawn
  std::vector<std::string> awaited;  // previous members neither back nor gone, for the logs
  bool hasPrevious = false;          // the round follows a formed one
};

class RoundCloser {
 public:
  RoundCloser(Store& store, const RendezvousSettings& settings, std::string token);

  // Whether round g (join counter `count`) may close on its last call (rule above). Incremental
  // for one round: reads only join records it has not seen, then the previous round's gone list
  // and the heartbeats still awaited (at most 5 round trips). Throws what the store throws.
  CloseReadiness readiness(const RendezvousKeys& keys, int64_t g, int64_t count);

  // Closes round g unless another agent won the election. Throws what the store throws.
  void tryClose(const RendezvousKeys& keys, int64_t g);

 private:
  struct Pending {
    int rank = 0;
    std::string host;
    std::string beat;  // last heartbeat value seen
    Clock::time_point since;
    bool observed = false;
  };

  void resetFor(const RendezvousKeys& keys, int64_t g);
  void readNewRecords(const RendezvousKeys& keys, int64_t g, int64_t upTo);
  void noteRecord(const std::string& value);
  void dropRanks(const std::vector<int>& ranks);
  void dropSilent(const RendezvousKeys& keys);
  std::optional<int64_t> previousFormed(const RendezvousKeys& keys);
  std::vector<JoinRecord> readJoinRecords(const RendezvousKeys& keys, int64_t g, int64_t n);
  // Waits for the join records `missing`; returns those still missing after a whole
  // heartbeatTimeout in which none arrived.
  std::vector<std::string> awaitRecords(std::vector<std::string> missing);
  // Writes round g's assignments for join slots 1..slots, heartbeat keys, roster, `formed` and
  // result (last).
  void publish(const RendezvousKeys& keys, const RoundMembership& m, int64_t slots);

  Store& store_;
  const RendezvousSettings& settings_;
  const std::string token_;
  const std::chrono::milliseconds heartbeatTimeout_;
  std::shared_ptr<spdlog::logger> log_;
  // The round readiness() last looked at, and what it learned so far.
  int64_t incarnation_ = -1;
  int64_t round_ = -1;
  std::optional<int64_t> previous_;
  std::vector<Pending> pending_;
  int64_t seenSlots_ = 0;
  int live_ = 0;
};

}  // namespace ddp::detail
