// Bad-node exclusion (bad_node_exclusion.hpp): the class that counts this node's failures and
// claims to leave, then the agent's steps around it — a failure replaced in place, strict
// preflight's blame, a straggler, sitting out the cooldown.
#include "launcher/agent/bad_node_exclusion.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "launcher/agent/detail/agent_impl.hpp"
#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {

namespace {

// The round record a node strict preflight blamed publishes: "1" when it leaves the job, "0" when
// it may not (the round then fails everywhere).
constexpr const char* kLeavesRecord = "exclusion-leaves";

int64_t unixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

BadNodeExclusion::BadNodeExclusion(const LaunchConfig& config, std::string host)
    : config_(config),
      host_(std::move(host)),
      log_(logger("agent")),
      window_(ExclusionSettings{config.excludeAfter, config.excludeWindow,
                                config.excludeCooldown}) {}

// An explicit --node-rank that is not the round's last: the others (their ranks requested too)
// could not form a round without this one, so it may not leave.
bool BadNodeExclusion::rankKeepsNode(int nodeCount, const std::string& what) const {
  if (!config_.nodeRank || *config_.nodeRank >= nodeCount - 1) return false;
  log_->warn("{}, but this node's --node-rank {} is not the round's last ({} nodes): the others "
             "could not form a round without it, so it stays", what, *config_.nodeRank, nodeCount);
  return true;
}

NodeExclusion BadNodeExclusion::record(int nodeRank, int64_t generation,
                                       const std::string& why) const {
  NodeExclusion e;
  e.host = host_;
  e.pid = static_cast<int>(::getpid());
  e.nodeRank = nodeRank;
  e.generation = generation;
  e.why = why;
  e.cooldownMs = config_.excludeCooldown.count();
  e.unixMs = unixNowMs();
  return e;
}

std::string BadNodeExclusion::countFailure(Rendezvous& rdzv,
                                           const std::vector<WorkerFailure>& failures,
                                           const RendezvousResult& round) {
  const auto why = window_.record(failures, FailureWindow::Clock::now());
  if (!why) return "";
  if (rankKeepsNode(round.nodeCount, "this node's workers keep failing (" + *why + ")")) return "";
  // A report that would find the budget spent ends the job: nothing to leave then.
  if (config_.restartScope == RestartScope::kAll && round.restartsUsed >= config_.maxRestarts) {
    return "";
  }
  const ExclusionClaim claim =
      rdzv.exclusions().claim(record(round.nodeRank, round.generation, *why));
  if (claim.granted) return *why;
  log_->warn("this node's workers keep failing ({}), but leaving it out would drop the job below "
             "min_nodes={} ({} node(s) in generation {}, {} leaving, {} spare(s) waiting): it "
             "stays", *why, config_.minNodes, claim.members, round.generation, claim.leaving,
             claim.spares);
  return "";
}

}  // namespace ddp

namespace ddp::detail {

std::string Agent::leaveInstead(const std::vector<WorkerFailure>& failures) {
  std::string why = exclusion_.countFailure(*rdzv_, failures, running_);
  exclusion_.leave(why, !why.empty());
  return why;
}

std::optional<Agent::Step> Agent::excludeAfterPreflight(const RendezvousResult& round,
                                                        const PreflightFailed& failed) {
  if (config_.excludeAfter < 1 || failed.blamed.empty()) return std::nullopt;
  const auto& blamed = failed.blamed;
  const bool mine = std::find(blamed.begin(), blamed.end(), round.nodeRank) != blamed.end();
  const std::string why = "strict preflight blamed this node (node rank " +
                          std::to_string(round.nodeRank) + "; the round's first flag: " +
                          failed.line + ")";
  if (mine) {
    bool granted = false;
    if (!exclusion_.rankKeepsNode(round.nodeCount, "strict preflight blamed this node")) {
      const ExclusionClaim claim = blocking([&] {
        return rdzv_->exclusions().claim(exclusion_.record(round.nodeRank, round.generation, why));
      });
      granted = claim.granted;
      if (!granted) {
        log_->warn("strict preflight blamed this node ({}), but leaving it out would drop the "
                   "job below min_nodes={} ({} node(s), {} leaving, {} spare(s) waiting): the "
                   "round fails", failed.line, config_.minNodes, claim.members, claim.leaving,
                   claim.spares);
      }
    }
    rdzv_->publishRoundRecord(kLeavesRecord, granted ? "1" : "0");
    if (!granted) return std::nullopt;
  }
  // Every blamed node must leave, or none does: the round fails everywhere as without exclusion.
  const auto bound = peerCauseBound(settings_);
  auto answers = blocking([&] { return rdzv_->roundRecords(kLeavesRecord, blamed, bound); });
  if (auto* ended = std::get_if<RoundEnded>(&answers)) {
    if (mine) return std::nullopt;  // a blamed node said nothing (it died): fail as before
    return endedBeforeStart(round, ended->event, "while the nodes strict preflight blamed left");
  }
  for (const auto& answer : std::get<RoundRecords>(answers)) {
    if (answer != "1") {
      if (mine) log_->warn("another node strict preflight blamed may not leave: the round fails");
      return std::nullopt;
    }
  }
  if (mine) return sitOut(round, why);
  std::string who;
  for (int rank : blamed) who += (who.empty() ? "" : ",") + std::to_string(rank);
  log_->warn("strict preflight failed ({}); node(s) {} left the job for a cooldown: going on "
             "without them", failed.line, who);
  const auto end = blocking([&] { return rdzv_->awaitRoundEnd(bound); });
  RendezvousEvent event;
  if (end) {
    event = *end;
  } else {  // they left (their records say so): end the round for everybody
    event = RendezvousEvent{RendezvousEventKind::kPeerLost, round.generation,
                            "node(s) " + who + " left the job after strict preflight"};
  }
  return endedBeforeStart(round, event, "after strict preflight left nodes out");
}

void Agent::leaveForStraggler(const StragglerFlagged& f, Store& store) {
  if (!exclusion_.firstStragglerClaim(f.generation)) return;
  if (exclusion_.rankKeepsNode(f.nodeCount, f.line)) return;
  const std::string why = f.line + " (--exclude-stragglers)";
  const ExclusionClaim claim =
      ddp::claimExclusion(store, runId_, f.incarnation, f.generation, f.nodeCount, config_.minNodes,
                     exclusion_.record(f.nodeRank, f.generation, why));
  if (!claim.granted) {
    log_->warn("{}, but leaving this node out would drop the job below min_nodes={} ({} node(s) in "
               "generation {}, {} leaving, {} spare(s) waiting): it stays", f.line,
               config_.minNodes, claim.members, f.generation, claim.leaving, claim.spares);
    return;
  }
  supervisor_.post([this, g = f.generation, why] {
    exclusion_.leave(why, true);  // nothing failed: nothing to report
    supervisor_.leaveGeneration(g, "this node leaves the job: " + why);
  });
}

Agent::Step Agent::sitOut(const RendezvousResult& round, const std::string& why) {
  const auto cooldown = config_.excludeCooldown;
  log_->warn("leaving this node out of the job for {} (--exclude-cooldown) after generation {}: "
             "{}; it joins again after that, unless the job ends first", durationText(cooldown),
             round.generation, why);
  workerStore_.reset();
  const bool ended = blocking([&] { return rdzv_->exclusions().sitOut(cooldown); });
  exclusion_.satOut();
  if (ended) {
    log_->info("the job ended while this node was out");
  } else {
    log_->info("cooldown of {} over: joining the job again", durationText(cooldown));
  }
  return Rejoin{};
}

}  // namespace ddp::detail
