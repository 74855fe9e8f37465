// RoundState: one agent's part in the rounds of the job it joined — the incarnation it is attached
// to, its current round, and everything it does within a round: the worker store address, failure
// reports and the restart budget, the exit barrier, waiting for the round's end, and leaving.
//
// Waits never rely on a key that may be deleted: besides the key they wait for they read the
// round's end with readRoundEnd() (rendezvous_keys.hpp), which also sees a round whose keys are
// gone.
//
// Thread safety: the agent's thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "rendezvous/algorithm/detail/rendezvous_join.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/algorithm/detail/rendezvous_wait.hpp"
#include "rendezvous/algorithm/rendezvous_types.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::detail {

class RoundState {
 public:
  struct Current {
    int64_t generation = 0;
    RendezvousResult result;
  };

  RoundState(Store& store, const RendezvousSettings& settings, const NodeDescriptor& self,
             std::chrono::milliseconds slice);

  // "node <host> (pid <pid>)", for messages.
  std::string self() const;

  // The incarnation this agent joined (it drew or tried to draw a slot in one of its rounds).
  const std::optional<RendezvousKeys>& keys() const { return keys_; }
  void attach(RendezvousKeys keys) { keys_.emplace(std::move(keys)); }
  // This agent's last round as a member (what its next join record says).
  MemberHistory history() const { return history_; }
  const std::optional<Current>& current() const { return current_; }
  // next() returned `round`.
  void enter(const RendezvousResult& round);
  // next() was called again: ends the current round for everybody unless it already ended.
  void leaveRunningRound();

  // The Rendezvous, FailureLedger and ExclusionBoard methods of the same names (rendezvous.hpp,
  // failure_ledger.hpp and exclusion_board.hpp say what they do; claimExclusion is
  // ExclusionBoard::claim).
  void publishWorkerStore(const std::string& addr, uint16_t port);
  WorkerStoreResult workerStore();
  std::optional<RendezvousEvent> awaitRoundEnd(std::chrono::milliseconds timeout);
  // reportVerdict() when `verdict` is not empty.
  RendezvousEvent reportFailure(const std::string& failureRecordJson,
                                const std::string& verdict = {});
  RecoveryResult recordRecovery(const std::string& failureRecordJson);
  std::vector<std::string> failureRecords();
  ExitBarrierResult exitBarrier(std::chrono::milliseconds timeout);
  void leave();
  ExclusionClaim claimExclusion(const NodeExclusion& exclusion);
  bool sitOut(std::chrono::milliseconds cooldown);
  void markReturned(int64_t generation);
  bool awaitOthersLeft(std::chrono::milliseconds timeout);

 private:
  // `key` appeared (true), the round ended (end), or the deadline passed (neither).
  struct KeyOrEnd {
    bool found = false;
    std::optional<RoundEnd> end;
  };
  KeyOrEnd awaitKeyOrEnd(const std::string& key, int64_t g, Clock::time_point deadline);
  const Current& requireRound(const char* what) const;
  RendezvousEvent awaitFailureDecision(int64_t g);
  RendezvousEvent spendRestart(int64_t g);
  // The restart budget is spent: ends the job (failed) with a reason naming this node.
  RendezvousEvent failBudgetSpent(int64_t g);
  RendezvousEvent endWithVerdict(int64_t g, const std::string& verdict);
  void finishLeaving(int64_t g, int nodes);
  static RendezvousEvent eventOf(int64_t g, const RoundEnd& end) {
    return RendezvousEvent{end.kind, g, end.detail, end.lostRank, end.removed, end.verdict};
  }

  Store& store_;
  const RendezvousSettings& settings_;
  const NodeDescriptor& node_;
  const std::chrono::milliseconds slice_;
  std::shared_ptr<spdlog::logger> log_;
  std::optional<RendezvousKeys> keys_;
  // The round next() returned while it runs (reset when this agent joins again or leaves).
  std::optional<Current> current_;
  // The last round this agent was a member of and has not left: leave() counts it.
  std::optional<Current> member_;
  MemberHistory history_;
  // The generation this agent last left, if it left at all.
  std::optional<int64_t> leftGeneration_;
};

}  // namespace ddp::detail
