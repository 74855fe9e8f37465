#include "launcher/recovery/in_place_recovery.hpp"

#include "launcher/recovery/restart_policy.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

std::string howItFailed(const WorkerFailure& f) {
  if (!f.hang.empty()) return "hung (" + f.hang + ")";
  if (f.signal != 0) return "was killed by " + signalName(f.signal);
  return "exited with " + std::to_string(f.exitCode);
}

std::string describe(const std::vector<WorkerFailure>& failures) {
  std::string out;
  for (const auto& f : failures) {
    out += (out.empty() ? "" : "; ") + std::string("rank ") + std::to_string(f.rank) +
           " (pid " + std::to_string(f.pid) + ") " + howItFailed(f);
  }
  return out;
}

}  // namespace

InPlaceRecovery::InPlaceRecovery(RestartScope scope, int localWorkers, InPlaceHooks hooks)
    : scope_(scope), hooks_(std::move(hooks)) {
  if (scope_ != RestartScope::kFailed) return;
  keeper_ = std::make_unique<QuorumKeeper>(localWorkers);
}

InPlaceRecovery::~InPlaceRecovery() { endGeneration(); }

void InPlaceRecovery::addEnvironment(EnvMap& env, int localRank) const {
  if (!keeper_) return;
  env["DDP_QUORUM_BOARD"] = keeper_->boardPath();
  env["DDP_QUORUM_SLOT"] = std::to_string(localRank);
}

void InPlaceRecovery::beginGeneration(const RendezvousResult& round,
                                      const WorkerStoreAddress& store) {
  if (!keeper_) return;
  endGeneration();
  round_ = round;
  streaks_.clear();
  keeper_->onAllInPlace([this, g = round.generation](bool standbyCapable) {
    GenerationControl& sup = hooks_.supervisor;
    sup.post([this, &sup, g, standbyCapable] {
      if (!sup.running(g) || !hooks_.standbySpec) return;
      std::string why = "not every worker's program can wait as one (worker_runtime/standby.hpp)";
      std::optional<StandbyPlan> plan;
      if (standbyCapable) {
        why.clear();
        plan = hooks_.standbySpec(why);
      }
      if (plan) {
        sup.keepStandby(g, std::move(plan->spec), plan->count);
      } else if (!why.empty()) {
        logger("agent")->info("no standby process in generation {}: {}; a replacement starts as "
                              "a new process", g, why);
      }
    });
  });
  keeper_->beginGeneration(round, store.addr, store.port, "", std::chrono::seconds(30));
  hooks_.supervisor.handleFailures(
      [this](const std::vector<WorkerFailure>& failures) { return take(failures); });
  if (hooks_.nextRound) {
    hooks_.supervisor.handleRoundEnds([this](const RendezvousEvent& e) { return takeRoundEnd(e); });
  }
}

void InPlaceRecovery::endGeneration() {
  {
    std::lock_guard<std::mutex> lock(pauseMutex_);
    ending_ = true;  // a back-off in flight ends now
  }
  pauseCv_.notify_all();
  if (helper_.joinable()) helper_.join();
  {
    std::lock_guard<std::mutex> lock(pauseMutex_);
    ending_ = false;
  }
  if (!keeper_) return;
  hooks_.supervisor.handleFailures({});
  hooks_.supervisor.handleRoundEnds({});
  keeper_->endGeneration();
}

bool InPlaceRecovery::take(const std::vector<WorkerFailure>& failures) {
  if (helper_.joinable()) helper_.join();  // the previous decision has posted its answer
  const bool finished = hooks_.supervisor.anyWorkerSucceeded();
  helper_ = std::thread([this, failures, finished] { decide(failures, finished); });
  return true;
}

namespace {

// A round ended by a peer lost or a newcomer, with this node (rank `nodeRank` in it) still in the
// job: its workers may go on in the next round. This node itself lost, or away long enough that
// the round is gone: its workers belong to a world that moved on without them.
bool workersMayGoOn(const RendezvousEvent& e, int nodeRank) {
  const bool membership = e.kind == RendezvousEventKind::kPeerLost ||
                          e.kind == RendezvousEventKind::kScaleUp;
  return membership && !e.roundRemoved && e.lostRank != nodeRank;
}

}  // namespace

bool InPlaceRecovery::takeRoundEnd(const RendezvousEvent& e) {
  if (!workersMayGoOn(e, round_.nodeRank)) return false;
  if (!keeper_->allInPlace()) {
    logger("agent")->info("generation {} ended ({}); not every worker announced that it recovers in "
                          "place, so every worker restarts", round_.generation, e.detail);
    return false;
  }
  if (helper_.joinable()) helper_.join();
  helper_ = std::thread([this, e] { moveOn(e); });
  return true;
}

// On the helper thread: the next round for workers that keep running.
void InPlaceRecovery::moveOn(RendezvousEvent event) {
  auto log = logger("agent");
  GenerationControl& sup = hooks_.supervisor;
  const int64_t from = round_.generation;
  log->info("generation {} ended ({}); the workers keep running while this node joins the next "
            "round", from, event.detail);
  try {
    NextInPlace answer = hooks_.nextRound();
    // Rounds that ended before they were ready (the storm's "generation N+1 ended before its
    // worker store was published"): the workers never saw them; this node joins the next one.
    for (int passed = 1; std::holds_alternative<InPlaceRoundEnded>(answer); ++passed) {
      const auto& ended = std::get<InPlaceRoundEnded>(answer);
      const std::string why = "generation " + std::to_string(ended.event.generation) +
                              " ended before it was ready: " + ended.event.detail;
      if (passed > kRoundsPassed || !workersMayGoOn(ended.event, ended.nodeRank)) {
        answer = NotInPlace{passed > kRoundsPassed
                                ? why + "; " + std::to_string(kRoundsPassed) + " rounds in a row"
                                : why};
        break;
      }
      log->info("{}; the workers of generation {} keep running while this node joins the next "
                "round", why, from);
      answer = hooks_.nextRound();
    }
    if (auto* no = std::get_if<NotInPlace>(&answer)) {
      log->warn("generation {} cannot go on in place ({}): every worker restarts", from, no->why);
      sup.post([&sup, from, event] { sup.stopForEvent(from, event); });
      return;
    }
    auto next = std::get_if<InPlaceRound>(&answer);
    next->ended = event;
    round_ = next->round;
    keeper_->beginGeneration(next->round, next->store.addr, next->store.port, "",
                             std::chrono::seconds(30), /*inherited=*/true);
    log->info("generation {} formed in place: node rank {} of {}, ranks {}..{} of world {}; the "
              "workers rebuild into quorum {}.0", next->round.generation, next->round.nodeRank,
              next->round.nodeCount, next->round.baseRank,
              next->round.baseRank + keeper_->localWorkers() - 1, next->round.worldSize,
              next->round.generation);
    if (hooks_.afterBoard) hooks_.afterBoard(*next);
    sup.post([this, &sup, from, n = *next] {
      if (sup.running(from)) sup.continueGeneration(from, n.round.generation, hooks_.adopt(n));
    });
  } catch (const Error& e) {
    log->warn("generation {} cannot go on in place ({}): every worker restarts", from, e.what());
    sup.post([&sup, from, event] { sup.stopForEvent(from, event); });
  }
}

// On the helper thread: everything that blocks on a store; the answer goes back through post().
void InPlaceRecovery::decide(std::vector<WorkerFailure> failures, bool workerFinished) {
  auto log = logger("agent");
  GenerationControl& sup = hooks_.supervisor;
  const int64_t g = round_.generation;
  try {
    // A worker of this node exited 0, or one anywhere finished its last step.
    workerFinished = workerFinished || keeper_->workerFinished();
    const InPlaceDecision d = decideInPlace({scope_, keeper_->workersInPlace(), round_.worldSize,
                                             workerFinished, keeper_->stateLost()});
    if (!d.replace) {
      sup.post([&sup, g, why = d.why] { sup.failGeneration(g, why); });
      return;
    }
    const std::string verdict = hooks_.verdictInstead ? hooks_.verdictInstead(failures) : "";
    if (!verdict.empty()) {
      const std::string why = describe(failures) + ": no replacement (" + verdict + ")";
      sup.post([&sup, g, why] { sup.failGeneration(g, why); });
      return;
    }
    const auto delay = backoffFor(failures);
    if (delay.count() > 0) {
      log->warn("{}: a replacement failed at start again; waiting {} ms before the next one",
                describe(failures), delay.count());
      if (!pause(delay)) return;  // the generation ended meanwhile
    }
    const std::string leave = hooks_.leaveInstead ? hooks_.leaveInstead(failures) : "";
    FailureRecord record{g, round_.nodeRank, hooks_.host, failures};
    record.quorum = keeper_->current().quorum + 1;  // the number it will most likely get
    const RecoveryResult spent = hooks_.rendezvous().failures().recordRecovery(toJson(record));
    if (!leave.empty() && std::holds_alternative<RecoveryGranted>(spent)) {
      const std::string why = describe(failures) + ": this node leaves the job (" + leave + ")";
      sup.post([&sup, g, why] { sup.failGeneration(g, why); });
      return;
    }
    if (auto* ended = std::get_if<RoundEnded>(&spent)) {
      // The round had ended, or this recovery found the budget spent: the rendezvous decides.
      sup.postRendezvousEvent(ended->event);
      return;
    }
    const int used = std::get<RecoveryGranted>(spent).restartsUsed;
    std::vector<int> ranks;
    for (const auto& f : failures) ranks.push_back(f.rank);
    const std::string reason = describe(failures) + ": replaced in place";
    const QuorumChange change = keeper_->makeQuorum(ranks, reason);
    log->warn("{}; replacing in place (quorum {}, restart {} of {}); the other workers keep running",
              describe(failures), toString(change.id), used, hooks_.maxRestarts);
    std::vector<WorkerSpec> specs;
    for (const auto& f : failures) specs.push_back(hooks_.replacementSpec(f.localRank, change.id.quorum));
    noteReplaced(failures);
    sup.post([&sup, g, specs = std::move(specs)]() mutable { sup.replaceWorkers(g, std::move(specs)); });
  } catch (const Error& e) {
    const std::string why = std::string("in-place recovery failed: ") + e.what();
    sup.post([&sup, g, why] { sup.failGeneration(g, why); });
  }
}

std::chrono::milliseconds InPlaceRecovery::backoffFor(const std::vector<WorkerFailure>& failures) {
  int worst = 0;
  for (const auto& f : failures) {
    Streak& s = streaks_[f.localRank];
    const int64_t joined = keeper_->joinedCount(f.rank);
    // A failed replacement that never joined failed at start; the rank's first process, one that
    // joined, or one that went on into a generation formed in place did not.
    const bool atStart = s.replaced && s.generation == round_.generation && joined <= s.joinedBefore;
    s.failedAtStart = atStart ? s.failedAtStart + 1 : 0;
    s.generation = round_.generation;
    s.joinedBefore = joined;  // the next replacement joins when the counter moves past it
    worst = std::max(worst, s.failedAtStart);
  }
  if (worst == 0) return std::chrono::milliseconds(0);
  auto delay = kFirstBackoff;
  for (int i = 1; i < worst && delay < kMaxBackoff; ++i) delay *= 2;
  return std::min(delay, kMaxBackoff);
}

void InPlaceRecovery::noteReplaced(const std::vector<WorkerFailure>& failures) {
  for (const auto& f : failures) streaks_[f.localRank].replaced = true;
}

bool InPlaceRecovery::pause(std::chrono::milliseconds delay) {
  std::unique_lock<std::mutex> lock(pauseMutex_);
  return !pauseCv_.wait_for(lock, delay, [this] { return ending_; });
}

}  // namespace ddp
