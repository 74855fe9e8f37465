#include "launcher/agent/supervisor.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <optional>
#include <utility>

#include "launcher/hang/hang_monitor.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {

namespace {

std::vector<int> handledSignals(const std::vector<int>& extra) {
  std::vector<int> handled = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  handled.insert(handled.end(), extra.begin(), extra.end());
  return handled;
}

std::string sender(const ReceivedSignal& s) {
  if (s.sender <= 0) return s.code == SI_KERNEL ? "the kernel (a terminal)" : "the kernel";
  return "pid " + std::to_string(s.sender) + (s.relay ? ", a relay in ddprun's process group" : "");
}

}  // namespace

Supervisor::Supervisor(GroupSettings settings, const std::vector<int>& extraSignals,
                       bool extraNamed, HangSettings hang)
    : work_(boost::asio::make_work_guard(io_)),
      settings_(std::move(settings)),
      hang_(std::move(hang)),
      reaper_(io_),
      signals_(io_, handledSignals(extraSignals), extraNamed ? extraSignals : std::vector<int>{},
               [this](const ReceivedSignal& s) { onSignal(s, /*held=*/false); }) {
  for (int sig : signals_.leftIgnored()) {
    logger("agent")->debug("{} was ignored when ddprun started (nohup?); it stays ignored",
                           signalName(sig));
  }
  if (!hang_.enabled()) return;
  timerServer_ = std::make_unique<FileTimerServer>(io_, hang_.fileTimer ? hang_.timerFile : "");
  // Only the beats of straggler detection, or torch's file timers, need the FIFO: say so plainly.
  const std::string purpose = hang_.timeout.count() > 0
                                  ? "hang detection: a worker without progress for " +
                                        std::to_string(hang_.timeout.count()) + " ms hangs"
                              : hang_.stragglers ? std::string("progress beats for straggler detection")
                                                 : std::string("hang detection: no --hang-timeout");
  logger("agent")->info("{}{}; worker timer FIFO {}", purpose,
                        hang_.fileTimer ? ", torch's file timers served" : "", timerServer_->path());
}

Supervisor::~Supervisor() = default;

// At a terminal the workers share ddprun's foreground process group: what the keyboard sent
// (Ctrl-C, Ctrl-\: the terminal signals its whole foreground group) reached each of them as it
// reached ddprun, unless they were started after it (a signal held for the next generation). A
// hang-up reaches only the session leader, so SIGHUP is forwarded as without a terminal.
SignalDelivery Supervisor::deliveryOf(const ReceivedSignal& s, bool held) const {
  const bool fromKeyboard =
      (s.signo == SIGINT || s.signo == SIGQUIT) && s.code == SI_KERNEL && s.sender <= 0;
  return settings_.terminal.foregroundGroup > 0 && fromKeyboard && !held
             ? SignalDelivery::kAlreadyDelivered
             : SignalDelivery::kForward;
}

void Supervisor::onSignal(const ReceivedSignal& s, bool held) {
  auto log = logger("agent");
  const std::string name = signalName(s.signo);
  if (group_ == nullptr || outcome_) {
    if (!asksToStop(s.signo)) {
      log->info("received {} while no workers run; nothing to forward it to", name);
    } else if (!pendingSignal_) {
      pendingSignal_ = s;
    }
    return;
  }
  switch (tally_.onSignal(s, group_->stopping())) {
    case SignalAction::kDrop:
      log->info("received {} again (from {}); the workers already got it", name, sender(s));
      return;
    case SignalAction::kKillNow:
      log->warn("second SIGINT (from {}): killing the workers now", sender(s));
      group_->killNow();
      return;
    case SignalAction::kForward:
      if (!asksToStop(s.signo)) {
        log->info("received {}; forwarding it to the workers (they keep running)", name);
        group_->notify(s.signo);
        return;
      }
      group_->stop(s.signo, nullptr, deliveryOf(s, held));  // already stopping: only forwards it
      if (pending_.kind != OutcomeKind::kSignalled) {  // the first stop signal is why it stopped
        pending_.kind = OutcomeKind::kSignalled;
        pending_.signal = s.signo;
      }
      return;
    case SignalAction::kStop: {
      const SignalDelivery delivery = deliveryOf(s, held);
      log->info("received {}; {} (grace {} ms)", name,
                delivery == SignalDelivery::kForward
                    ? "forwarding it to the workers"
                    : "the workers got it from the terminal too",
                settings_.shutdownTimeout.count());
      pending_.kind = OutcomeKind::kSignalled;
      pending_.signal = s.signo;
      group_->stop(s.signo, [this] { finish(pending_.kind); }, delivery);
      return;
    }
  }
}

void Supervisor::onWorkerExit(int localRank) {
  if (monitor_ != nullptr) monitor_->onWorkerExit(localRank);
  if (observer_) observer_(group_->states());
  if (group_->stopping()) return;
  if (group_->allSucceeded()) {
    finish(OutcomeKind::kSucceeded);
    return;
  }
  considerFailures();
}

void Supervisor::considerFailures() {
  const auto failures = group_->failures();
  if (failures.empty() || recovering_ || transitioning_) return;  // the rest are still running
  if (failureHandler_) {
    recovering_ = true;
    if (failureHandler_(failures)) return;
    recovering_ = false;
  }
  stopForFailure("");
}

void Supervisor::stopForFailure(const std::string& note) {
  pending_.kind = OutcomeKind::kFailed;
  const WorkerFailure first = group_->failures().front();
  const std::string how = !first.hang.empty() ? "hung (" + first.hang + ")"
                          : first.signal != 0 ? "was killed by " + signalName(first.signal)
                                              : "exited with " + std::to_string(first.exitCode);
  logger("agent")->info("worker rank {} (local {}, pid {}) {}; stopping the other workers{}",
                        first.rank, first.localRank, first.pid, how,
                        note.empty() ? "" : " (" + note + ")");
  group_->stop(SIGTERM, [this] { finish(pending_.kind); });
}

void Supervisor::post(std::function<void()> fn) { boost::asio::post(io_, std::move(fn)); }

void Supervisor::replaceWorkers(int64_t generation, std::vector<WorkerSpec> specs) {
  if (group_ == nullptr || outcome_ || generation != generation_ || group_->stopping()) return;
  recovering_ = false;
  for (auto& spec : specs) {
    if (timerServer_) addHangEnvironment(spec.env, hang_, timerServer_->path());
    const int localRank = spec.localRank;
    try {
      group_->replace(std::move(spec));
    } catch (const Error& e) {
      stopForFailure(std::string("its replacement could not start: ") + e.what());
      return;
    }
    if (monitor_ != nullptr) monitor_->onWorkerReplaced(localRank);
  }
  if (observer_) observer_(group_->states());
  considerFailures();  // failures that came while the answer was pending
}

void Supervisor::keepStandby(int64_t generation, WorkerSpec spec, int count) {
  if (!running(generation)) return;
  if (timerServer_) addHangEnvironment(spec.env, hang_, timerServer_->path());
  group_->keepStandby(std::move(spec), count);
}

void Supervisor::failGeneration(int64_t generation, const std::string& why) {
  if (group_ == nullptr || outcome_ || generation != generation_ || group_->stopping()) return;
  recovering_ = false;
  stopForFailure(why);
}

void Supervisor::leaveGeneration(int64_t generation, const std::string& why) {
  if (group_ == nullptr || outcome_ || generation != generation_ || group_->stopping()) return;
  recovering_ = false;
  pending_.kind = OutcomeKind::kFailed;
  logger("agent")->info("stopping the workers of generation {}: {}", generation, why);
  group_->stop(SIGTERM, [this] { finish(pending_.kind); });
}

bool Supervisor::anyWorkerSucceeded() const {
  if (group_ == nullptr) return false;
  for (const auto& w : group_->states()) {
    if (w.exited && WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0) return true;
  }
  return false;
}

void Supervisor::finish(OutcomeKind kind) {
  if (outcome_) return;
  pending_.kind = kind;
  pending_.failures = group_->failures();
  outcome_ = std::move(pending_);
}

void Supervisor::postRendezvousEvent(const RendezvousEvent& event) {
  boost::asio::post(io_, [this, event] {
    if (group_ == nullptr || outcome_) return;
    if (transitioning_) {  // maybe for the round being moved into: decided once it is
      deferred_ = event;
      return;
    }
    if (event.generation != generation_ || group_->stopping()) return;
    if (roundEndHandler_ && !recovering_ && roundEndHandler_(event)) {
      transitioning_ = true;
      return;
    }
    logger("agent")->info("rendezvous ended generation {} ({}); stopping the workers",
                          event.generation, event.detail);
    pending_.kind = OutcomeKind::kRendezvousEvent;
    pending_.event = event;
    group_->stop(SIGTERM, [this] { finish(pending_.kind); });
  });
}

void Supervisor::continueGeneration(int64_t from, int64_t to, std::vector<WorkerSpec> specs) {
  if (group_ == nullptr || outcome_ || from != generation_) return;
  transitioning_ = false;
  generation_ = to;
  group_->retarget(to, std::move(specs));
  if (observer_) observer_(group_->states());
  if (deferred_) {
    const RendezvousEvent e = *deferred_;
    deferred_.reset();
    postRendezvousEvent(e);  // dropped unless it is for `to`
  }
  considerFailures();
}

void Supervisor::stopForEvent(int64_t from, const RendezvousEvent& event) {
  if (group_ == nullptr || outcome_ || from != generation_) return;
  transitioning_ = false;
  deferred_.reset();
  if (group_->stopping()) return;
  logger("agent")->info("generation {} ended ({}); stopping the workers", from, event.detail);
  pending_.kind = OutcomeKind::kRendezvousEvent;
  pending_.event = event;
  group_->stop(SIGTERM, [this] { finish(pending_.kind); });
}

std::optional<int> Supervisor::takePendingSignal() {
  if (!pendingSignal_) return std::nullopt;
  const int signo = pendingSignal_->signo;
  pendingSignal_.reset();
  return signo;
}

GenerationOutcome Supervisor::runGeneration(std::vector<WorkerSpec> specs, const LogLayout& logs,
                                            int64_t generation) {
  WorkerGroup group(io_, reaper_, settings_, logs, generation);
  outcome_.reset();
  pending_ = GenerationOutcome{};
  generation_ = generation;
  tally_ = SignalTally{};
  recovering_ = false;
  transitioning_ = false;
  deferred_.reset();
  if (timerServer_) {
    for (auto& spec : specs) addHangEnvironment(spec.env, hang_, timerServer_->path());
  }
  group.start(std::move(specs), [this](int localRank) { onWorkerExit(localRank); });
  group_ = &group;
  std::optional<HangMonitor> monitor;  // destroyed before the group
  if (hang_.enabled()) monitor.emplace(io_, reaper_, group, hang_, timerServer_.get());
  monitor_ = monitor ? &*monitor : nullptr;
  if (observer_) observer_(group.states());
  if (pendingSignal_) {  // arrived before the start
    const ReceivedSignal early = *pendingSignal_;
    pendingSignal_.reset();
    onSignal(early, /*held=*/true);
  }
  while (!outcome_) io_.run_one();
  // A signal that came with the workers' last exit (Slurm signals every process of a step, so a
  // worker may take it and exit first) is handled too, not left unread when the agent ends.
  signals_.poll();
  terminalModes_.restore();  // a worker killed inside readline leaves the terminal raw
  monitor_ = nullptr;
  group_ = nullptr;
  return std::move(*outcome_);
}

}  // namespace ddp
