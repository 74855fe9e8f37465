// Bad-node exclusion in the agent (node_exclusion.hpp): counting this node's failures, claiming
// to leave, sitting out the cooldown.
#include <unistd.h>

#include <chrono>

#include "launcher/agent/detail/agent_impl.hpp"
#include "rendezvous/base/duration_text.hpp"

namespace ddp::detail {

namespace {

int64_t unixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::string Agent::countFailure(const std::vector<WorkerFailure>& failures,
                                const RendezvousResult& round) {
  const auto why = exclusion_.record(failures, FailureWindow::Clock::now());
  if (!why) return "";
  // A report that would find the budget spent ends the job: nothing to leave then.
  if (config_.restartScope == RestartScope::kAll && round.restartsUsed >= config_.maxRestarts) {
    return "";
  }
  NodeExclusion e;
  e.host = host_;
  e.pid = static_cast<int>(::getpid());
  e.nodeRank = round.nodeRank;
  e.generation = round.generation;
  e.why = *why;
  e.cooldownMs = config_.excludeCooldown.count();
  e.unixMs = unixNowMs();
  const ExclusionClaim claim = rdzv_->claimExclusion(e);
  if (claim.granted) return *why;
  log_->warn("this node's workers keep failing ({}), but leaving it out would drop the job below "
             "min_nodes={} ({} node(s) in generation {}, {} leaving, {} spare(s) waiting): it "
             "stays", *why, config_.minNodes, claim.members, round.generation, claim.leaving,
             claim.spares);
  return "";
}

std::string Agent::leaveInstead(const std::vector<WorkerFailure>& failures) {
  sitOut_ = countFailure(failures, running_);
  sitOutRecorded_ = !sitOut_.empty();
  return sitOut_;
}

Agent::Step Agent::sitOut(const RendezvousResult& round, const std::string& why) {
  const auto cooldown = config_.excludeCooldown;
  log_->warn("leaving this node out of the job for {} (--exclude-cooldown) after generation {}: "
             "{}; it joins again after that, unless the job ends first", durationText(cooldown),
             round.generation, why);
  workerStore_.reset();
  const bool ended = blocking([&] { return rdzv_->sitOut(cooldown); });
  exclusion_.clear();
  returning_ = true;
  if (ended) {
    log_->info("the job ended while this node was out");
  } else {
    log_->info("cooldown of {} over: joining the job again", durationText(cooldown));
  }
  return Rejoin{};
}

}  // namespace ddp::detail
