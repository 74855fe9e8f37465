#include "launcher/supervisor.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <utility>

#include "rendezvous/logging.hpp"

namespace ddp {

Supervisor::Supervisor(GroupSettings settings, const std::vector<int>& extraSignals)
    : work_(boost::asio::make_work_guard(io_)),
      settings_(std::move(settings)),
      reaper_(io_),
      signals_(io_) {
  std::vector<int> handled = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
  handled.insert(handled.end(), extraSignals.begin(), extraSignals.end());
  for (int sig : handled) {
    boost::system::error_code ec;
    signals_.add(sig, ec);
    if (ec && ec != boost::asio::error::already_open) {
      throw Error("cannot handle signal " + signalName(sig) + ": " + ec.message());
    }
  }
  armSignals();
}

Supervisor::~Supervisor() {
  boost::system::error_code ignored;
  signals_.cancel(ignored);
}

void Supervisor::armSignals() {
  signals_.async_wait([this](const boost::system::error_code& ec, int signal) {
    if (ec) return;
    onSignal(signal);
    armSignals();
  });
}

void Supervisor::onSignal(int signal) {
  if (group_ == nullptr || outcome_) {
    pendingSignal_ = signal;
    return;
  }
  auto log = logger("agent");
  const bool again = pending_.kind == OutcomeKind::kSignalled;
  if (again && signal == SIGINT) {
    log->warn("second SIGINT: killing the workers now");
    group_->killNow();
    return;
  }
  if (again || group_->stopping()) {
    group_->stop(signal, nullptr);  // only forwards it
    pending_.kind = OutcomeKind::kSignalled;
    pending_.signal = signal;
    return;
  }
  log->info("received {}; forwarding it to the workers (grace {} ms)", signalName(signal),
            settings_.shutdownTimeout.count());
  pending_.kind = OutcomeKind::kSignalled;
  pending_.signal = signal;
  group_->stop(signal, [this] { finish(pending_.kind); });
}

void Supervisor::onWorkerExit(int localRank) {
  (void)localRank;
  if (group_->stopping()) return;
  if (group_->allSucceeded()) {
    finish(OutcomeKind::kSucceeded);
    return;
  }
  if (group_->failures().empty()) return;  // the rest are still running
  pending_.kind = OutcomeKind::kFailed;
  const WorkerFailure first = group_->failures().front();
  logger("agent")->info("worker rank {} (local {}, pid {}) {}; stopping the other workers",
                        first.globalRank, first.localRank, first.pid,
                        first.signal != 0 ? "was killed by " + signalName(first.signal)
                                          : "exited with " + std::to_string(first.exitCode));
  group_->stop(SIGTERM, [this] { finish(pending_.kind); });
}

void Supervisor::finish(OutcomeKind kind) {
  if (outcome_) return;
  pending_.kind = kind;
  pending_.failures = group_->failures();
  outcome_ = std::move(pending_);
}

void Supervisor::postRendezvousEvent(const RendezvousEvent& event) {
  boost::asio::post(io_, [this, event] {
    if (group_ == nullptr || outcome_ || event.generation != generation_) return;
    if (group_->stopping()) return;
    logger("agent")->info("rendezvous ended generation {} ({}); stopping the workers",
                          event.generation, event.detail);
    pending_.kind = OutcomeKind::kRendezvousEvent;
    pending_.event = event;
    group_->stop(SIGTERM, [this] { finish(pending_.kind); });
  });
}

std::optional<int> Supervisor::takePendingSignal() {
  auto out = pendingSignal_;
  pendingSignal_.reset();
  return out;
}

GenerationOutcome Supervisor::runGeneration(std::vector<WorkerSpec> specs, const LogLayout& logs,
                                            int64_t generation) {
  WorkerGroup group(io_, reaper_, settings_, logs, generation);
  outcome_.reset();
  pending_ = GenerationOutcome{};
  generation_ = generation;
  group.start(std::move(specs), [this](int localRank) { onWorkerExit(localRank); });
  group_ = &group;
  if (auto signal = takePendingSignal()) onSignal(*signal);  // arrived before the start
  while (!outcome_) io_.run_one();
  group_ = nullptr;
  return std::move(*outcome_);
}

}  // namespace ddp
