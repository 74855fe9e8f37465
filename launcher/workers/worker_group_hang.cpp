// WorkerGroup's side of hang detection (worker_group.hpp: markHung ... endHung): the steps that
// launcher/hang/ asks of the group while it takes a hung worker's stacks (hung_workers.hpp) — the
// mark and its failure number, the worker's stderr capture, what the stacks showed, its end.
#include "launcher/workers/worker_group.hpp"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "launcher/workers/detail/group_worker.hpp"

namespace ddp {

std::vector<WorkerGroup::Watched> WorkerGroup::watched() const {
  std::vector<Watched> out;
  for (const auto& w : workers_) {
    out.push_back({w->spec.localRank, w->spec.rank, w->pid, w->exited,
                   w->out->bytesRead() + w->err->bytesRead()});
  }
  return out;
}

WorkerGroup::Worker* WorkerGroup::workerAt(int localRank) const {
  auto it = std::find_if(workers_.begin(), workers_.end(),
                         [&](const auto& w) { return w->spec.localRank == localRank; });
  return it == workers_.end() ? nullptr : it->get();
}

bool WorkerGroup::markHung(const HangVerdict& v) {
  Worker* w = workerAt(v.localRank);
  if (w == nullptr || w->exited || w->hang) return false;
  w->hang = v;
  w->failureSeq = takeFailureNumber();
  w->hangHeld = true;
  return true;
}

void WorkerGroup::beginStderrCapture(int localRank) {
  if (Worker* w = workerAt(localRank)) w->err->beginCapture();
}

std::string WorkerGroup::endStderrCapture(int localRank) const {
  Worker* w = workerAt(localRank);
  return w == nullptr ? "" : w->err->endCapture();
}

std::string WorkerGroup::workerDir(int localRank) const {
  return workerAt(localRank) == nullptr ? "" : logs_.workerDir(generation_, localRank);
}

void WorkerGroup::setHungStacks(int localRank, RecordedStacks stacks) {
  Worker* w = workerAt(localRank);
  if (w != nullptr && w->hang) w->stacks = std::move(stacks);
}

void WorkerGroup::endHung(int localRank) {
  Worker* w = workerAt(localRank);
  if (w == nullptr || !w->hangHeld) return;
  w->hangHeld = false;
  if (w->exited) return;
  if (w->hang->signal == 0) {
    signalWorker(w->pid, SIGKILL);
  } else {
    ::kill(w->hang->target, w->hang->signal);  // the timer's signal to its process, as torch
    ::kill(w->hang->target, SIGCONT);           // it was frozen for gdb
  }
}

}  // namespace ddp
