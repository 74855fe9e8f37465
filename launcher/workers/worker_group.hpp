// WorkerGroup: this node's workers of one generation — started together, watched together,
// stopped together.
//
// At a terminal (GroupSettings::terminal, terminal.hpp) the workers join ddprun's foreground
// process group and their console streams are pseudo-terminals; "a worker's process group" below
// is then the worker and every process below it.
//
// start() spawns one process per WorkerSpec, each under its own guardian (worker_process.hpp,
// guardian.hpp), and routes its output (output_pump.hpp). Every exit is an event from the
// ChildReaper (the guardian's exit, carrying the worker's exact wait status); the owner learns of
// it through the exit callback and decides what to do. stop() forwards a signal to every live
// worker's process group, waits up to the shutdown grace on a steady_timer, then SIGKILLs what is
// left and reaps everything. When a worker exits, its guardian kills whatever it started (its
// process group and every other descendant, setsid() or not) before reporting, so nothing
// outlives the worker.
//
// Thread safety: use from the io_context's thread only. Destroying a group with live workers kills
// and reaps them synchronously; whatever debugs a worker (hang detection's gdb, launcher/hang/)
// must be gone by then, as a worker under ptrace is not reported to its guardian: hang detection's
// objects are destroyed before the group (hang_monitor.hpp).
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "launcher/workers/child_reaper.hpp"
#include "launcher/failures/failure_summary.hpp"
#include "launcher/workers/hang_verdict.hpp"
#include "launcher/workers/log_layout.hpp"
#include "launcher/workers/output_pump.hpp"
#include "launcher/workers/worker_env_builder.hpp"

namespace ddp {

class FailureSequencer;

// One worker as the status pages show it (launcher/status/status_publisher.hpp): its WorkerSpec's
// RankLayout (the pages show rank and localRank), then its process.
struct WorkerState : RankLayout {
  pid_t pid = -1;
  bool exited = false;
  int status = 0;              // wait status once exited
  bool stoppedByAgent = false;  // a stop signal reached it while it still ran
};

struct GroupSettings {
  // This host's name (summaries, {host} in prefixes) and --role.
  std::string host;
  std::string role = "default";
  // Console prefix template, ddprun's syntax (launcher/config/log_prefix.hpp).
  std::string prefixTemplate = "[{role}{rank}]:";
  // --redirects / --tee / --local-ranks-filter (empty = every local rank on the console).
  StreamSpec redirects;
  StreamSpec tee;
  std::vector<int> localRanksFilter;
  // Grace between the forwarded signal and SIGKILL (--shutdown-timeout).
  std::chrono::milliseconds shutdownTimeout{std::chrono::seconds(30)};
  // Where console lines go (tests point these at files).
  int consoleOut = 1;
  int consoleErr = 2;
  // What ddprun's terminal offers the workers (terminal.hpp; the agent detects it, none here).
  TerminalPlan terminal;
  // Last stderr lines kept per worker for the failure summary.
  std::size_t stderrTailLines = 20;
};

class StandbyPool;

// Whether stop() sends its signal, or the workers got it already: at a terminal they share
// ddprun's foreground process group, and the terminal's own Ctrl-C reached each of them.
enum class SignalDelivery { kForward, kAlreadyDelivered };

class WorkerGroup {
 public:
  // Called on the io_context thread after a worker exited and its output was drained.
  using ExitCallback = std::function<void(int localRank)>;

  WorkerGroup(boost::asio::io_context& io, ChildReaper& reaper, GroupSettings settings,
              const LogLayout& logs, int64_t generation);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Spawns every worker (log dirs prepared first). Throws SpawnError or ConfigError after
  // killing and reaping any worker already started.
  void start(std::vector<WorkerSpec> specs, ExitCallback onExit);

  // Sends `signal` to every live worker's process group; SIGKILL after the shutdown grace; runs
  // `done` once every worker was reaped (before returning if none is alive). A worker still running
  // when a stop signal reaches it is marked stoppedByAgent (unless it numbered its own failure);
  // one that had already exited, reaped or not, is not. A second call only forwards its signal.
  // kAlreadyDelivered: the workers got `signal` already (see SignalDelivery); nothing is sent
  // but the SIGKILL after the grace. Non-blocking.
  void stop(int signal, std::function<void()> done,
            SignalDelivery delivery = SignalDelivery::kForward);
  // SIGKILLs every live worker's process group now (a second Ctrl-C). Non-blocking.
  void killNow();
  // Sends a signal that does not ask to stop (SIGUSR1, ...) to every live worker's process group:
  // no grace timer, no change of state. Non-blocking.
  void notify(int signal);

  bool allExited() const;
  bool allSucceeded() const;
  bool stopping() const { return stopping_; }
  // Workers that exited non-zero or by a signal, with everything the summary shows, in the order
  // they were reaped. Each exit gets the next reap sequence number (1, 2, ...) when it is reaped;
  // a failed worker without a failure number in its error file gets one from the generation's
  // counter in the worker store its env names (failure_sequencer.hpp; blocks up to 1 s when that
  // store does not answer, once per generation), unless ddprun had signalled it to stop.
  std::vector<WorkerFailure> failures() const;
  // Workers that failed and were replaced in place (replace()), in the order they were replaced.
  const std::vector<WorkerFailure>& replaced() const { return replaced_; }

  // In-place recovery (docs/recovery.md): starts a new process for `spec.localRank`, whose worker
  // exited with a failure; its failure moves from failures() to replaced(). The new process's
  // output goes on in the same log files. Throws SpawnError or ConfigError (nothing started) and
  // Error when that worker still runs, succeeded or is unknown. Non-blocking.
  // A standby process (keepStandby) takes the place when one is ready and runs spec.argv.
  void replace(WorkerSpec spec);
  // Keeps `count` standby processes of `spec` (standby_pool.hpp) until the group stops. A second
  // call is ignored. Throws nothing (a standby that cannot start is logged).
  void keepStandby(WorkerSpec spec, int count);
  // In-place recovery: the running workers go on as generation `generation`; `specs` (one per
  // local rank) are their environments and ranks there, for what is read from a worker's spec
  // later (failure records, the failure counter's store, replacements' log files). Non-blocking.
  void retarget(int64_t generation, std::vector<WorkerSpec> specs);
  int64_t generation() const { return generation_; }
  std::vector<pid_t> pids() const;
  // Every worker, by local rank.
  std::vector<WorkerState> states() const;

  // -- hang detection: launcher/hang/ decides and takes the stacks (hung_workers.hpp); these are
  // the steps it asks of the group. On the io_context's thread, like the rest; an unknown local
  // rank changes nothing. --
  struct Watched {
    int localRank = 0;
    int rank = 0;  // RANK
    pid_t pid = 0;
    bool exited = false;
    uint64_t outputBytes = 0;  // stdout + stderr bytes read so far
  };
  std::vector<Watched> watched() const;
  // Marks the worker of verdict.localRank hung: numbers its failure now (so hung workers keep the
  // order of the verdicts; may block up to 1 s, as when reaping), keeps stop signals other than
  // SIGKILL away from it until endHung(), and keeps the verdict: its reason for the failure, its
  // target and signal for endHung(). Returns false, changing nothing, when that worker exited or
  // is hung already.
  bool markHung(const HangVerdict& verdict);
  // From now on the worker's stderr lines are kept apart, out of its failure's tail (a Python
  // worker's faulthandler dump; OutputPump::beginCapture). Non-blocking.
  void beginStderrCapture(int localRank);
  // Ends that and returns what was kept, with what the pipe holds now (read without waiting; "" for
  // an unknown rank). Non-blocking.
  std::string endStderrCapture(int localRank) const;
  // The worker's log folder in the current generation (LogLayout::workerDir; "" for an unknown
  // rank).
  std::string workerDir(int localRank) const;
  // What the stacks of a worker marked hung showed: its failure carries them (failures(),
  // replaced()). Ignored for a worker not marked hung.
  void setHungStacks(int localRank, RecordedStacks stacks);
  // Ends a worker marked hung and not ended yet: SIGKILL to its process group when the verdict's
  // signal is 0, else that signal to the verdict's target, then SIGCONT (it may have been frozen
  // for gdb). Stop signals reach it again from then on; nothing is sent to one that exited.
  // Non-blocking.
  void endHung(int localRank);

 private:
  struct Worker;
  void watchOne(Worker& worker, bool append = false);
  WorkerFailure failureOf(const Worker& worker) const;
  void onReaped(Worker& worker, int status);
  void numberExit(Worker& worker);
  void onGuardianLost(Worker& worker);
  void killAndReap(Worker& worker);
  void signalLive(int signal, SignalDelivery delivery);
  bool onConsole(int localRank, StdStreams which) const;
  std::string prefixOf(const WorkerSpec& spec, pid_t pid) const;
  void shareTerminal(WorkerSpec& spec, int localRank) const;
  void maybeStopped();
  int64_t takeFailureNumber();
  Worker* workerAt(int localRank) const;

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  GroupSettings settings_;
  const LogLayout& logs_;
  int64_t generation_;
  std::chrono::steady_clock::time_point startedAt_;
  std::vector<std::unique_ptr<Worker>> workers_;
  ExitCallback onExit_;
  bool stopping_ = false;
  boost::asio::steady_timer graceTimer_;
  std::function<void()> stopped_;
  // Exit numbering: reap order, and the job-wide failure counter (created at the first failure).
  static constexpr std::chrono::milliseconds kSequenceBudget{1000};
  int64_t reaped_ = 0;
  std::unique_ptr<FailureSequencer> sequencer_;
  std::vector<WorkerFailure> replaced_;
  std::unique_ptr<StandbyPool> standby_;  // ended as the group stops
};

}  // namespace ddp
