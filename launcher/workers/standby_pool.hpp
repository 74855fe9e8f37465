// StandbyPool: a node's standby processes (ddprun --standby-workers; worker_runtime/standby.hpp,
// docs/recovery.md "Standby processes").
//
// A standby is the workers' own program, started through spawnWorkers (its own guardian, nothing
// outlives the agent) with the environment of a spec minus the rank variables, plus DDP_STANDBY
// naming a FIFO in a private directory of this pool. The program loads, prepares what does not
// depend on its rank and blocks reading the FIFO. take() writes a failed worker's replacement
// environment there: the process becomes that worker, and the caller watches it from then on.
// Its output is not read before: a standby prints nothing until it is a worker (what it printed
// then goes to that worker's log).
//
// A standby that exits before it is taken is logged with its status and started again, at most
// kMaxRestarts times in a row: a program that cannot wait as a standby must not loop. The count
// starts again when a standby is taken (the program can wait as one), so a long job whose standbys
// are killed now and then keeps getting them. A FIFO or a spawn that fails ends the standbys for
// the pool's life (its WorkerGroup's).
//
// Nothing is left behind: each standby's guardian unlinks its FIFO when it exits, and the last
// one removes the directory when the agent died (even of SIGKILL; WorkerSpec::ownedFile).
// A standby taken is made again kRefillDelay later, so its start does not compete for CPUs with
// the recovery it serves. A standby prepares under SCHED_IDLE when this agent can move it back
// (idle_priority.hpp), so its start takes only CPU time the workers leave; take() moves every
// thread of it to the agent's policy before the hand-over.
//
// Thread safety: use from the io_context's thread only. The destructor SIGKILLs and reaps every
// standby synchronously and removes the FIFOs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launcher/workers/child_reaper.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "launcher/workers/worker_process.hpp"

namespace ddp {

class StandbyPool {
 public:
  static constexpr int kMaxRestarts = 3;
  static constexpr std::chrono::milliseconds kRefillDelay{1000};

  // Keeps `count` standbys of `spec` (its argv; its env without the rank variables). Starts them
  // now. Throws Error when the FIFO directory cannot be made; a standby that cannot start is
  // logged, not thrown.
  StandbyPool(boost::asio::io_context& io, ChildReaper& reaper, WorkerSpec spec, int count);
  ~StandbyPool();
  StandbyPool(const StandbyPool&) = delete;
  StandbyPool& operator=(const StandbyPool&) = delete;

  // Hands the oldest live standby `env` (its whole new environment) when `argv` is the pool's:
  // returns its process, no longer watched by the pool (the caller watches its guardian). nullopt
  // when none is ready, or the hand-over failed: the standby ended before it read any of the
  // message, or a message larger than its FIFO holds was not drained within 1 s (the standby is
  // killed, with a log line). A standby that read the message and has already ended is returned:
  // it served, as a new process would have.
  // Non-blocking in practice (one write to a FIFO its reader drains; at most 1 s).
  std::optional<SpawnedProcess> take(const std::vector<std::string>& argv, const EnvMap& env);
  // Standbys started and not taken or exited.
  std::size_t ready() const { return standbys_.size(); }

 private:
  struct Standby {
    SpawnedProcess proc;
    std::string fifo;
    int fd = -1;  // the FIFO, O_RDWR: the standby's open never blocks, a write never fails EPIPE
  };
  void startOne();
  void onEarlyExit(pid_t guardianPid, int guardianStatus);
  void release(Standby& s, bool kill);
  // Closes the FIFOs of taken standbys that read their message (or exited), and unlinks them.
  void pruneHandedOver();
  bool handOver(Standby& s, const EnvMap& env);

  boost::asio::io_context& io_;
  ChildReaper& reaper_;
  WorkerSpec spec_;
  const std::size_t count_;
  std::string dir_;
  int made_ = 0;
  int earlyExits_ = 0;
  bool disabled_ = false;  // a FIFO or a spawn failed
  int returnPolicy_ = -1;  // a standby's policy once taken (idle_priority.hpp); -1: never idled
  bool canStart() const { return !disabled_ && earlyExits_ <= kMaxRestarts; }
  std::vector<std::unique_ptr<Standby>> standbys_;
  struct HandedOver {
    int fd;
    pid_t pid;
    std::string fifo;
  };
  std::vector<HandedOver> handedOver_;
  boost::asio::steady_timer refill_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // expires with the pool
};

}  // namespace ddp
