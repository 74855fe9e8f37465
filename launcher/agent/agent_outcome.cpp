// What a generation's outcome leads to: the restart policy's decisions (restart_policy.hpp), the
// rendezvous calls they name, and the job's end on this node (the summary, the exit code).
#include <time.h>

#include <optional>
#include <variant>

#include "launcher/agent/detail/agent_impl.hpp"
#include "launcher/failures/job_summary.hpp"
#include "launcher/failures/verdict.hpp"
#include "launcher/failures/failure_summary.hpp"

namespace ddp::detail {

namespace {

std::string wallTime(int64_t unixMs) {
  const time_t seconds = static_cast<time_t>(unixMs / 1000);
  tm local{};
  char buf[64] = "";
  if (unixMs > 0 && localtime_r(&seconds, &local) != nullptr) {
    strftime(buf, sizeof(buf), " at %Y-%m-%d %H:%M:%S %Z", &local);
  }
  return buf;
}

}  // namespace

PolicyInput Agent::inputFor(Situation situation, const RendezvousResult& round,
                            const RendezvousEvent* end) const {
  PolicyInput in;
  in.situation = situation;
  if (end != nullptr) {
    in.roundEnd = end->kind;
    in.endedByVerdict = end->verdict;
    in.droppedFromRound = end->roundRemoved || end->lostRank == round.nodeRank;
  }
  in.restartsUsed = round.restartsUsed;
  in.maxRestarts = config_.maxRestarts;
  in.storeFailover = failover_.enabled() && !ending_;
  in.sitOut = exclusion_.leaving();
  in.sitOutRecorded = exclusion_.recorded();
  return in;
}

// Asks the restart policy what the generation's outcome leads to, performing the rendezvous calls
// it names, until it says rejoin or exit.
PolicyInput Agent::inputFor(const GenerationOutcome& outcome, const RendezvousResult& round) {
  PolicyInput in;
  switch (outcome.kind) {
    case OutcomeKind::kSucceeded:
      return inputFor(Situation::kWorkersSucceeded, round);
    case OutcomeKind::kFailed:
      in = inputFor(Situation::kWorkersFailed, round);
      in.allCommunicationFailures = allCommunicationFailures(outcome.failures);
      in.aloneInRound = round.nodeCount == 1;
      in.verdict = judge(outcome, round);
      // Unless the in-place path counted and claimed it already (exclusion_.recorded()).
      if (!exclusion_.recorded() && in.verdict.empty() &&
          !(in.allCommunicationFailures && !in.aloneInRound)) {
        exclusion_.leave(exclusion_.countFailure(*rdzv_, outcome.failures, round), false);
        in.sitOut = exclusion_.leaving();
      }
      return in;
    case OutcomeKind::kSignalled:
      in = inputFor(Situation::kSignalled, round);
      in.signal = outcome.signal;
      return in;
    case OutcomeKind::kRendezvousEvent:
      return inputFor(Situation::kRoundEnded, round, &outcome.event);
  }
  return in;
}

std::string Agent::judge(const GenerationOutcome& outcome, const RendezvousResult& round) {
  if (config_.verdictAfter < 1) return "";
  FailureRecord record{round.generation, round.nodeRank, host_, outcome.failures};
  return blocking([&] { return judgeWithLedger(rdzv_->failures(), record, config_.verdictAfter); });
}

// On InPlaceRecovery's helper thread (nothing else uses the rendezvous meanwhile).
std::string Agent::verdictInPlace(const std::vector<WorkerFailure>& failures) {
  return judgeWithLedger(rdzv_->failures(),
                         FailureRecord{running_.generation, running_.nodeRank, host_, failures},
                         config_.verdictAfter);
}

Agent::Step Agent::follow(const RendezvousResult& round, const GenerationOutcome& outcome) {
  RendezvousEvent last = outcome.event;
  Decision d = decide(inputFor(outcome, round));
  while (true) {
    log_->debug("generation {}: {}", round.generation, d.why);
    status_.generationEnded(outcome, d, last);
    switch (d.action) {
      case Action::kRejoin:
        if (last.kind == RendezvousEventKind::kPeerLost && last.lostRank == round.nodeRank) {
          log_->warn("this node was declared lost in generation {} ({}); rejoining the job as a "
                     "newcomer", round.generation, last.detail);
        } else if (d.collateral) {
          log_->warn("workers failed with communication errors after generation {} ended ({}); "
                     "the failures are collateral: nothing published, no restart spent",
                     round.generation, last.detail);
        }
        return Rejoin{};
      case Action::kJobFailed:
        return Exit{jobFailed(outcome.failures, &round, last.detail, d.exitCode)};
      case Action::kFailOver:
        return FailOver{last.detail};
      case Action::kSitOut:
        return sitOut(round, exclusion_.leaving());
      case Action::kSucceed:
        leaveJob();
        return Exit{0};
      case Action::kExit:
        status_.finish();
        if (last.kind == RendezvousEventKind::kStoreLost) {
          // An overloaded store (out of descriptors) is alive; its detail says so first.
          const bool overloaded = last.detail.starts_with("the rendezvous store is overloaded");
          log_->error("{}: {}", overloaded ? "rendezvous store overloaded" : "lost the rendezvous store",
                      last.detail);
          return Exit{storeLost(outcome.failures, round, last.detail, d.exitCode)};
        }
        if (d.leave) rdzv_->leave();
        return Exit{d.exitCode};
      case Action::kAwaitExitBarrier:
      case Action::kAwaitPeerCause:
      case Action::kReportFailure:
      case Action::kReportVerdict: {
        Performed done = perform(d, round, outcome);
        if (done.event) last = std::move(*done.event);
        d = std::move(done.next);
        break;
      }
    }
  }
}

// Performs a rendezvous call the policy asked for (d.action is one of the four that name one).
Agent::Performed Agent::perform(const Decision& d, const RendezvousResult& round,
                                const GenerationOutcome& outcome) {
  if (d.action == Action::kAwaitExitBarrier) {
    const auto timeout = config_.rdzvConf.exitBarrierTimeout;
    const ExitBarrierResult r = blocking([this, timeout] { return rdzv_->exitBarrier(timeout); });
    if (std::holds_alternative<AllSucceeded>(r)) {
      return {decide(inputFor(Situation::kExitBarrierPassed, round)), std::nullopt};
    }
    const RendezvousEvent ended = std::get<RoundEnded>(r).event;
    return {decide(inputFor(Situation::kRoundEnded, round, &ended)), ended};
  }
  if (d.action == Action::kAwaitPeerCause) {
    const auto bound = peerCauseBound(settings_);
    log_->info("workers failed with communication errors; waiting up to {} ms for a lost peer "
               "to end generation {}", bound.count(), round.generation);
    const auto end = blocking([this, bound] { return rdzv_->awaitRoundEnd(bound); });
    return {decide(inputFor(Situation::kPeerCauseAwaited, round, end ? &*end : nullptr)), end};
  }
  FailureRecord record{round.generation, round.nodeRank, host_, outcome.failures};
  RendezvousEvent answer;
  if (d.action == Action::kReportVerdict) {
    answer = blocking([&] { return rdzv_->failures().reportVerdict(toJson(record), d.verdict); });
  } else {
    answer = blocking([this, &record] { return rdzv_->failures().reportFailure(toJson(record)); });
  }
  if (answer.kind == RendezvousEventKind::kRestartRequested) {
    log_->warn("workers failed in generation {}; restarting the job ({})", round.generation,
               answer.detail);
  }
  return {decide(inputFor(Situation::kFailureReported, round, &answer)), answer};
}

int Agent::reportJobEnded(const JobEnded& e) {
  const std::string when = wallTime(e.endedAtUnixMs);
  const std::string dropped =
      "this node was dropped from the job after generation " +
      std::to_string(e.memberGeneration) +
      (e.droppedDetail.empty() ? std::string() : " (" + e.droppedDetail + ")");
  if (e.result == JobResult::kSucceeded) {
    if (e.standing == NodeStanding::kNeverMember) {
      log_->error("the job finished{} ({}) before this node became a member of a round: it ran "
                  "no worker", when, e.reason);
      return kRendezvousFailedExitCode;
    }
    if (e.standing == NodeStanding::kDropped) {
      log_->warn("{}; the job went on without it and succeeded{}: {}", dropped, when, e.reason);
    } else {
      log_->info("the job succeeded{}: {}", when, e.reason);
    }
    leaveJob();
    return 0;
  }
  if (e.result == JobResult::kUnknown) {
    log_->error("{}", e.reason);
    return kRendezvousFailedExitCode;
  }
  if (e.standing == NodeStanding::kDropped) {
    log_->warn("{}; the job went on without it and failed{}", dropped, when);
  } else if (e.standing == NodeStanding::kNeverMember) {
    log_->warn("the job failed{} before this node became a member of a round", when);
  }
  return jobFailed({}, nullptr, e.reason, e.verdict ? kVerdictExitCode : 0);
}

int Agent::jobFailed(const std::vector<WorkerFailure>& local, const RendezvousResult* round,
                     const std::string& reason, int verdictExitCode) {
  ending_ = true;
  const FailedJob job{round ? std::optional<RendezvousResult>(*round) : std::nullopt, local};
  JobSummarySettings settings{host_, config_.entrypointName,
                              config_.shutdownTimeout + std::chrono::seconds(5)};
  settings.verdictAfter = config_.verdictAfter;
  settings.cause = RendezvousCause{reason.empty() ? std::string()
                                                  : "the rendezvous ended the job: " + reason,
                                   kJobEndedByRendezvousExitCode,
                                   "the job was ended through the rendezvous, not by a worker"};
  if (verdictExitCode != 0) {
    log_->error("the job stopped with a verdict (exit {}): {}", verdictExitCode, reason);
    settings.verdict = RendezvousCause{reason, verdictExitCode,
                                       "the job stopped with a verdict instead of restarting; "
                                       "--verdict-after=" + std::to_string(config_.verdictAfter)};
  }
  const int code = blocking([&] { return finishFailedJob(*rdzv_, job, settings, logs_); });
  leaveJob();
  return code;
}

// The store is gone: this node's own summary, the lost store its cause unless a local worker's
// failure explains the end.
int Agent::storeLost(const std::vector<WorkerFailure>& local, const RendezvousResult& round,
                     const std::string& detail, int exitCode) {
  ending_ = true;
  const FailedJob job{round, local};
  JobSummarySettings settings{host_, config_.entrypointName, std::chrono::milliseconds(0)};
  settings.cause = RendezvousCause{"the rendezvous store was lost: " + detail, exitCode,
                                   "the rendezvous store was lost"};
  return summarizeLocally(job, settings, logs_);
}

}  // namespace ddp::detail
