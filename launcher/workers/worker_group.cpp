#include "launcher/workers/worker_group.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <optional>
#include <utility>

#include "launcher/config/log_prefix.hpp"
#include "launcher/workers/detail/group_worker.hpp"
#include "launcher/failures/failure_sequencer.hpp"
#include "launcher/workers/standby_pool.hpp"
#include "launcher/workers/worker_process.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

bool hasStream(StdStreams streams, StdStreams one) {
  return (static_cast<int>(streams) & static_cast<int>(one)) != 0;
}

int64_t unixNowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace


namespace {

bool succeeded(int status) { return WIFEXITED(status) && WEXITSTATUS(status) == 0; }

}  // namespace

WorkerGroup::WorkerGroup(boost::asio::io_context& io, ChildReaper& reaper, GroupSettings settings,
                         const LogLayout& logs, int64_t generation)
    : io_(io),
      reaper_(reaper),
      settings_(std::move(settings)),
      logs_(logs),
      generation_(generation),
      graceTimer_(io) {}

WorkerGroup::~WorkerGroup() {
  standby_.reset();
  for (auto& w : workers_) killAndReap(*w);
}

// SIGKILLs a worker that was not reaped yet; its guardian kills the rest of its tree and exits.
void WorkerGroup::killAndReap(Worker& w) {
  if (!w.exited) {
    reaper_.forget(w.proc.guardianPid);
    signalWorker(w.pid, SIGKILL);
    while (::waitpid(w.proc.guardianPid, nullptr, 0) < 0 && errno == EINTR) {
    }
    w.exited = true;
  }
  closeHandles(w.proc);
}

void WorkerGroup::start(std::vector<WorkerSpec> specs, ExitCallback onExit) {
  onExit_ = std::move(onExit);
  startedAt_ = std::chrono::steady_clock::now();
  logs_.prepare(generation_, static_cast<int>(specs.size()));
  for (auto& spec : specs) shareTerminal(spec, spec.localRank);
  std::vector<SpawnedProcess> procs = spawnWorkers(specs);  // throws with nothing left running
  for (std::size_t i = 0; i < specs.size(); ++i) {
    auto w = std::make_unique<Worker>();
    w->pid = procs[i].pid;
    w->proc = procs[i];
    w->spec = std::move(specs[i]);
    workers_.push_back(std::move(w));
  }
  try {
    for (auto& w : workers_) watchOne(*w);
  } catch (...) {
    for (auto& w : workers_) killAndReap(*w);
    throw;
  }
}

bool WorkerGroup::onConsole(int localRank, StdStreams which) const {
  const auto& only = settings_.localRanksFilter;
  const bool shown = only.empty() || std::find(only.begin(), only.end(), localRank) != only.end();
  const bool redirect = hasStream(settings_.redirects.forRank(localRank), which);
  const bool tee = hasStream(settings_.tee.forRank(localRank), which);
  return shown && (!redirect || tee);
}

std::string WorkerGroup::prefixOf(const WorkerSpec& spec, pid_t pid) const {
  return formatLogPrefix(settings_.prefixTemplate,
                         LogPrefixValues{spec.layout(), settings_.role, settings_.host, pid,
                                         generation_});
}

// A console stream that is a terminal gets a pseudo-terminal as wide as the console less the
// prefix, so that a progress bar sized to it fits on one line; a standby (localRank < 0) gets one
// for each stream some rank shows.
void WorkerGroup::shareTerminal(WorkerSpec& spec, int localRank) const {
  const TerminalPlan& plan = settings_.terminal;
  WorkerTerminal& t = spec.terminal;
  t.joinGroup = plan.foregroundGroup;
  t.stdoutPty = plan.stdoutPty && (localRank < 0 || onConsole(localRank, StdStreams::kStdout));
  t.stderrPty = plan.stderrPty && (localRank < 0 || onConsole(localRank, StdStreams::kStderr));
  const std::size_t prefix = prefixOf(spec, 0).size();
  constexpr std::size_t kNarrowest = 20;
  t.columns = plan.columns > prefix + kNarrowest ? static_cast<unsigned short>(plan.columns - prefix)
                                                 : plan.columns;
  t.rows = plan.rows;
}

void WorkerGroup::watchOne(Worker& w, bool append) {
  const int lr = w.spec.localRank;
  const std::string prefix = prefixOf(w.spec, w.pid);
  auto route = [&](StdStreams which, const std::string& path, int console, std::size_t tail) {
    const bool redirect = hasStream(settings_.redirects.forRank(lr), which);
    const bool tee = hasStream(settings_.tee.forRank(lr), which);
    StreamRoute r;
    r.filePath = (redirect || tee) ? path : "";
    r.consoleFd = onConsole(lr, which) ? console : -1;
    r.prefix = prefix;
    r.tailLines = tail;
    r.append = append;
    return r;
  };
  const int outFd = std::exchange(w.proc.stdoutFd, -1);  // the pumps own them from here
  const int errFd = std::exchange(w.proc.stderrFd, -1);
  w.out = std::make_unique<OutputPump>(
      io_, outFd,
      route(StdStreams::kStdout, logs_.stdoutPath(generation_, lr), settings_.consoleOut, 0));
  w.err = std::make_unique<OutputPump>(io_, errFd,
                                       route(StdStreams::kStderr, logs_.stderrPath(generation_, lr),
                                             settings_.consoleErr, settings_.stderrTailLines));
  reaper_.watch(w.proc.guardianPid, [this, &w](pid_t, int guardianStatus) {
    bool reported = true;
    const int status = workerExitStatus(w.proc, guardianStatus, reported);
    closeHandles(w.proc);
    if (!reported) onGuardianLost(w);
    onReaped(w, status);
  });
  w.out->start();
  w.err->start();
}

void WorkerGroup::onReaped(Worker& w, int status) {
  w.exited = true;
  w.status = status;
  w.unixMs = unixNowMs();
  w.monotonicMs = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - startedAt_)
                      .count();
  numberExit(w);
  // Nothing the worker started is left: its guardian killed and reaped the whole tree first.
  w.out->finish();
  w.err->finish();
  if (onExit_) onExit_(w.spec.localRank);
  maybeStopped();
}

void WorkerGroup::numberExit(Worker& w) {
  w.reapSeq = ++reaped_;
  if (succeeded(w.status)) return;
  w.errorFile = readErrorFile(w.spec.errorFile);
  if (w.errorFile && w.errorFile->failureSeq) {
    w.failureSeq = *w.errorFile->failureSeq;
    w.seqByWorker = true;
    return;
  }
  if (w.hang) return;  // numbered when it was found hung
  if (w.signalledBeforeExit) return;  // stopped by ddprun: never the root cause, no number needed
  w.failureSeq = takeFailureNumber();
}

int64_t WorkerGroup::takeFailureNumber() {
  if (!sequencer_ && !workers_.empty()) {
    sequencer_ = FailureSequencer::forWorkers(workers_.front()->spec.env, kSequenceBudget);
  }
  return sequencer_ ? sequencer_->next().value_or(0) : 0;
}

// The guardian was killed (its worker got SIGKILL from its parent-death signal): what the worker
// left behind was orphaned to the agent, which is a child subreaper; kill and reap it.
void WorkerGroup::onGuardianLost(Worker& w) {
  logger("agent")->warn("the guardian (pid {}) of worker rank {} (pid {}) was killed; the worker "
                        "and everything it started are killed too",
                        w.proc.guardianPid, w.spec.rank, w.pid);
  reaper_.sweepStrays();
}

void WorkerGroup::notify(int signal) {
  for (auto& w : workers_) {
    if (!w->exited) signalWorker(w->pid, signal);
  }
}

void WorkerGroup::signalLive(int signal, SignalDelivery delivery) {
  for (auto& w : workers_) {
    if (w->exited || (w->hangHeld && signal != SIGKILL)) continue;  // ended after the stacks
    if (!w->signalledBeforeExit) w->signalledBeforeExit = !hasExited(w->proc);
    if (delivery == SignalDelivery::kForward) signalWorker(w->pid, signal);
  }
}

void WorkerGroup::stop(int signal, std::function<void()> done, SignalDelivery delivery) {
  if (stopping_) {
    signalLive(signal, delivery);
    return;
  }
  stopping_ = true;
  standby_.reset();  // a standby holds no state: SIGKILLed at once
  stopped_ = std::move(done);
  signalLive(signal, delivery);
  graceTimer_.expires_after(settings_.shutdownTimeout);
  graceTimer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    logger("agent")->warn("workers still running {} ms after the stop signal; sending SIGKILL",
                          settings_.shutdownTimeout.count());
    signalLive(SIGKILL, SignalDelivery::kForward);
  });
  maybeStopped();  // nothing was alive: done at once
}

void WorkerGroup::killNow() { signalLive(SIGKILL, SignalDelivery::kForward); }

void WorkerGroup::maybeStopped() {
  if (!stopping_ || !allExited() || !stopped_) return;
  graceTimer_.cancel();
  auto done = std::move(stopped_);
  stopped_ = nullptr;
  done();
}

bool WorkerGroup::allExited() const {
  return std::all_of(workers_.begin(), workers_.end(), [](const auto& w) { return w->exited; });
}

bool WorkerGroup::allSucceeded() const {
  return std::all_of(workers_.begin(), workers_.end(), [](const auto& w) {
    return w->exited && WIFEXITED(w->status) && WEXITSTATUS(w->status) == 0;
  });
}

WorkerFailure WorkerGroup::failureOf(const Worker& w) const {
  WorkerFailure f;
  f.layout() = w.spec.layout();
  f.host = settings_.host;
  f.pid = w.pid;
  f.exitCode = WIFEXITED(w.status) ? WEXITSTATUS(w.status) : 0;
  f.signal = WIFSIGNALED(w.status) ? WTERMSIG(w.status) : 0;
  f.failureSeq = w.failureSeq;
  f.seqByWorker = w.seqByWorker;
  f.reapSeq = w.reapSeq;
  f.monotonicMs = w.monotonicMs;
  f.unixMs = w.unixMs;
  if (w.errorFile) {
    f.errorFile = w.spec.errorFile;
    f.message = w.errorFile->message;
    f.traceback = w.errorFile->traceback;
    f.step = w.errorFile->step.value_or(-1);
  }
  f.stderrTail.assign(w.err->tail().begin(), w.err->tail().end());
  // A worker that numbered its own failure failed before any stop signal could matter.
  f.stoppedByAgent = w.signalledBeforeExit && !w.seqByWorker && !w.hang;
  if (w.hang) {
    f.hang = w.hang->reason;
    f.stacks = w.stacks.shown;
    f.stacksFile = w.stacks.file;
    f.waitsForPeer = w.stacks.waitsForPeer;
  }
  return f;
}

std::vector<WorkerFailure> WorkerGroup::failures() const {
  std::vector<WorkerFailure> out;
  for (const auto& w : workers_) {
    if (!w->exited || succeeded(w->status)) continue;
    out.push_back(failureOf(*w));
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.reapSeq < b.reapSeq; });
  return out;
}

void WorkerGroup::retarget(int64_t generation, std::vector<WorkerSpec> specs) {
  generation_ = generation;
  logs_.prepare(generation_, static_cast<int>(workers_.size()));
  sequencer_.reset();  // the failure counter lives in the new generation's worker store
  for (auto& spec : specs) {
    for (auto& w : workers_) {
      if (w->spec.localRank == spec.localRank) {
        w->spec = std::move(spec);
        break;
      }
    }
  }
}

void WorkerGroup::replace(WorkerSpec spec) {
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const auto& w) { return w->spec.localRank == spec.localRank; });
  if (it == workers_.end() || !(*it)->exited || succeeded((*it)->status)) {
    throw Error("local rank " + std::to_string(spec.localRank) +
                " has no failed worker to replace");
  }
  shareTerminal(spec, spec.localRank);
  std::optional<SpawnedProcess> proc;
  if (standby_) proc = standby_->take(spec.argv, spec.env);
  if (proc) {
    logger("agent")->info("standby process {} takes the place of local rank {} (rank {})",
                          proc->pid, spec.localRank, spec.rank);
  } else {
    proc = spawnWorkers({spec})[0];  // throws with nothing started
  }
  replaced_.push_back(failureOf(**it));
  closeHandles((*it)->proc);
  auto w = std::make_unique<Worker>();
  w->pid = proc->pid;
  w->proc = *proc;
  w->spec = std::move(spec);
  *it = std::move(w);
  try {
    watchOne(**it, /*append=*/true);
  } catch (...) {
    killAndReap(**it);
    throw;
  }
}

void WorkerGroup::keepStandby(WorkerSpec spec, int count) {
  if (standby_ || stopping_ || count <= 0) return;
  shareTerminal(spec, -1);
  try {
    standby_ = std::make_unique<StandbyPool>(io_, reaper_, std::move(spec), count);
  } catch (const Error& e) {
    logger("agent")->warn("no standby process: {}", e.what());
  }
}

std::vector<WorkerState> WorkerGroup::states() const {
  std::vector<WorkerState> out;
  for (const auto& w : workers_) {
    out.push_back({w->spec.layout(), w->pid, w->exited, w->status, w->signalledBeforeExit});
  }
  return out;
}

std::vector<pid_t> WorkerGroup::pids() const {
  std::vector<pid_t> out;
  for (const auto& w : workers_) out.push_back(w->pid);
  return out;
}

}  // namespace ddp
