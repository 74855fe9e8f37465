// Supervisor: the agent's event loop. One io_context on the agent's thread carries every event —
// child exits (ChildReaper), worker output (OutputPump), signals (asio signal_set), shutdown
// grace timers and rendezvous events posted from the heartbeat thread — so nothing polls.
//
// runGeneration() runs one generation's WorkerGroup until it ends: every worker exited (all 0 =
// success), one failed (the rest are then stopped with SIGTERM, the shutdown grace, SIGKILL), a
// handled stop signal arrived (forwarded to every worker's process group, then the same grace), or
// a rendezvous event for this generation was posted (the group is stopped the same way). A handled
// signal that does not ask to stop (SIGUSR1, ...) is only forwarded. What each copy of a signal
// means (repeats, relays from ddprun's process group, a second Ctrl-C) is signal_rules.hpp.
//
// With hang detection (the HangSettings given) it also serves the worker timer FIFO for the agent's
// lifetime (file_timer_server.hpp), adds its environment to every worker and runs a HangMonitor
// beside each generation (hang_monitor.hpp).
//
// Thread safety: everything runs on the thread that calls runGeneration()/runBlocking() (which
// must be the thread that lives as long as the workers: the parent-death signal follows it),
// except postRendezvousEvent(), which any thread may call.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "launcher/hang/file_timer_server.hpp"
#include "launcher/hang/hang_settings.hpp"
#include "launcher/recovery/generation_control.hpp"
#include "launcher/workers/child_reaper.hpp"
#include "launcher/workers/signal_receiver.hpp"
#include "launcher/workers/signal_rules.hpp"
#include "launcher/workers/worker_group.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

class HangMonitor;

enum class OutcomeKind {
  kSucceeded,        // every worker exited 0
  kFailed,           // a worker failed; the group was stopped
  kSignalled,        // the agent got a stop signal; it was forwarded and the group stopped
  kRendezvousEvent,  // the rendezvous ended this generation; the group was stopped
};

struct GenerationOutcome {
  OutcomeKind kind = OutcomeKind::kSucceeded;
  int signal = 0;                       // kSignalled
  RendezvousEvent event{};              // kRendezvousEvent
  std::vector<WorkerFailure> failures;  // every worker that did not exit 0, observed order
};

class Supervisor final : public GenerationControl {
 public:
  // Handles SIGTERM, SIGINT, SIGHUP, SIGQUIT and `extraSignals` (--signals-to-handle) from now
  // until destruction, except those ignored at start (nohup) unless `extraNamed` (the user gave
  // --signals-to-handle) and the list has them. Throws Error when a signal cannot be handled,
  // ConfigError when the timer FIFO cannot be created.
  // `hang`: hang detection (hang_monitor.hpp; off by default).
  Supervisor(GroupSettings settings, const std::vector<int>& extraSignals,
             bool extraNamed = false, HangSettings hang = {});
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Starts `specs` and blocks until the generation ends (see the header comment). Throws what
  // WorkerGroup::start throws (nothing is left running then).
  GenerationOutcome runGeneration(std::vector<WorkerSpec> specs, const LogLayout& logs,
                                  int64_t generation);

  // Thread-safe, non-blocking: ends the running generation if `event` is for it; otherwise dropped.
  void postRendezvousEvent(const RendezvousEvent& event) override;

  // A stop signal that arrived while no generation ran (nullopt = none). Clears it. (A notice that
  // arrives then is logged and dropped: there is nobody to forward it to.)
  std::optional<int> takePendingSignal();

  // Runs the blocking `fn` (a rendezvous call) on a helper thread while signals are still
  // answered. Returns fn's result (or rethrows its exception). If a handled signal arrives first,
  // calls onSignal(signal), which must not return (the helper still uses the rendezvous).
  // Notices (signals that do not ask to stop) do not end the wait.
  template <class F, class OnSignal>
  std::invoke_result_t<F> runBlocking(F fn, OnSignal onSignal);

  boost::asio::io_context& io() { return io_; }

  // Called on the agent's thread with every worker's state when a generation's workers started
  // and after each exit (the status pages); must not block.
  using WorkerObserver = std::function<void(const std::vector<WorkerState>&)>;
  void observeWorkers(WorkerObserver observer) { observer_ = std::move(observer); }
  // Straggler detection's watch (hang settings; null when off), for the status publisher.
  std::shared_ptr<StragglerWatch> stragglers() const { return hang_.stragglers; }

  // -- in-place recovery (docs/recovery.md): generation_control.hpp says what each does --
  void handleFailures(FailureHandler handler) override { failureHandler_ = std::move(handler); }
  void handleRoundEnds(RoundEndHandler handler) override {
    roundEndHandler_ = std::move(handler);
  }
  void post(std::function<void()> fn) override;
  void replaceWorkers(int64_t generation, std::vector<WorkerSpec> specs) override;
  void keepStandby(int64_t generation, WorkerSpec spec, int count) override;
  void failGeneration(int64_t generation, const std::string& why) override;
  void continueGeneration(int64_t from, int64_t to, std::vector<WorkerSpec> specs) override;
  void stopForEvent(int64_t from, const RendezvousEvent& event) override;
  bool running(int64_t generation) const override {
    return group_ != nullptr && !outcome_ && generation == generation_ && !group_->stopping();
  }
  bool anyWorkerSucceeded() const override;
  // io thread, for generation `generation`: stops its workers although none failed (this node
  // leaves the job, `why`): the outcome is kFailed with every worker stopped by ddprun. Ignored
  // when that generation is over or stopping.
  void leaveGeneration(int64_t generation, const std::string& why);

 private:
  // `held`: the signal came while no workers ran and is applied to the next generation's.
  void onSignal(const ReceivedSignal& s, bool held);
  SignalDelivery deliveryOf(const ReceivedSignal& s, bool held) const;
  void onWorkerExit(int localRank);
  void considerFailures();
  void stopForFailure(const std::string& note);
  void finish(OutcomeKind kind);

  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  GroupSettings settings_;
  HangSettings hang_;
  ChildReaper reaper_;
  SignalReceiver signals_;
  TerminalModes terminalModes_;  // stdin's modes at start, put back after each generation
  // State of the running generation (io thread only).
  WorkerGroup* group_ = nullptr;
  int64_t generation_ = -1;
  std::optional<GenerationOutcome> outcome_;
  GenerationOutcome pending_;
  SignalTally tally_;
  std::optional<ReceivedSignal> pendingSignal_;
  std::unique_ptr<FileTimerServer> timerServer_;  // with hang detection
  HangMonitor* monitor_ = nullptr;                 // the running generation's
  WorkerObserver observer_;
  FailureHandler failureHandler_;
  RoundEndHandler roundEndHandler_;
  bool recovering_ = false;     // the failure handler took failures; its answer is pending
  bool transitioning_ = false;  // the round-end handler took an event; its answer is pending
  std::optional<RendezvousEvent> deferred_;  // an event that came while transitioning
};

template <class F, class OnSignal>
std::invoke_result_t<F> Supervisor::runBlocking(F fn, OnSignal onSignal) {
  using Result = std::invoke_result_t<F>;
  std::packaged_task<Result()> task(std::move(fn));
  std::future<Result> result = task.get_future();
  std::thread helper([this, &task] {
    task();
    boost::asio::post(io_, [] {});  // wake the loop
  });
  while (result.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    io_.run_one();
    if (auto signal = takePendingSignal()) onSignal(*signal);
  }
  helper.join();
  return result.get();
}

}  // namespace ddp
