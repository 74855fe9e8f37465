// GenerationControl: what in-place recovery does to the running generation's workers (the agent's
// Supervisor implements it; in_place_recovery.hpp uses it). A failed worker or a round's end is
// handed to a handler instead of stopping the workers; the handler's owner then ends the matter
// through post(): a replacement, the workers moved on to the next round, or the generation failed.
//
// Thread safety: post() and postRendezvousEvent() from any thread; everything else on the
// supervisor's io thread (the agent's thread while a generation runs).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "launcher/failures/failure_summary.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"

namespace ddp {

class GenerationControl {
 public:
  virtual ~GenerationControl() = default;

  // With a handler, a failed worker does not stop the others at once: handler(failures) runs on
  // the io thread with every current failure. True: the agent took them and will end the matter
  // through post() — replaceWorkers() (the generation goes on) or failGeneration(); failures
  // that come meanwhile wait for that answer. False: the group is stopped as without a handler.
  // An empty handler: none. Must not be changed while a generation runs.
  using FailureHandler = std::function<bool(const std::vector<WorkerFailure>&)>;
  virtual void handleFailures(FailureHandler handler) = 0;
  // A node lost or added in place: with a handler, a rendezvous event for the running generation
  // does not stop the workers at once: handler(event) runs on the io thread. True: the agent moves
  // the workers on to the next round and ends the matter through post() — continueGeneration()
  // or stopForEvent(); failures and events that come meanwhile wait for that answer. False: the
  // group is stopped as without a handler.
  using RoundEndHandler = std::function<bool(const RendezvousEvent&)>;
  virtual void handleRoundEnds(RoundEndHandler handler) = 0;

  // Runs fn on the io thread. Any thread; non-blocking.
  virtual void post(std::function<void()> fn) = 0;
  // Thread-safe, non-blocking: ends the running generation if `event` is for it; otherwise dropped.
  virtual void postRendezvousEvent(const RendezvousEvent& event) = 0;

  // io thread, for generation `generation`: starts each spec's new process (its old one failed;
  // WorkerGroup::replace). A spawn that fails stops the generation (kFailed). Ignored when that
  // generation is over or stopping.
  virtual void replaceWorkers(int64_t generation, std::vector<WorkerSpec> specs) = 0;
  // io thread, for generation `generation`: keeps `count` standby processes of `spec` beside its
  // workers (WorkerGroup::keepStandby); replaceWorkers() hands one a failed worker's rank first.
  // Ignored when that generation is over or stopping.
  virtual void keepStandby(int64_t generation, WorkerSpec spec, int count) = 0;
  // io thread: the failures taken cannot be recovered in place (`why`): every worker is stopped
  // and the generation's outcome is kFailed. Ignored when the generation is over or stopping.
  virtual void failGeneration(int64_t generation, const std::string& why) = 0;
  // io thread: the running workers of generation `from` go on as generation `to`; `specs` are
  // their environments and ranks in it (WorkerGroup::retarget). Ignored when `from` is over.
  virtual void continueGeneration(int64_t from, int64_t to, std::vector<WorkerSpec> specs) = 0;
  // io thread: moving on failed: the workers of generation `from` stop as for `event`.
  virtual void stopForEvent(int64_t from, const RendezvousEvent& event) = 0;

  // io thread: true while generation `generation`'s workers run and are not being stopped.
  virtual bool running(int64_t generation) const = 0;
  // io thread: true when a worker of the running generation exited 0.
  virtual bool anyWorkerSucceeded() const = 0;
};

}  // namespace ddp
