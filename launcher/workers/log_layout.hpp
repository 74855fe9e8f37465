// LogLayout: where a worker's files live —
//   <root>/<run-id>/node_<node rank>/attempt_<generation>/<local_rank>/{stdout.log, stderr.log,
//                                                                      error.json}
// Every agent of a job may share one --log-dir (a shared filesystem under Slurm, several agents on
// one host): an agent writes only below node_<its node rank in that generation>/, which no other
// agent of that generation has (the rendezvous gives each node its own rank), never removes
// anything outside it, and creating the shared folders above it concurrently is harmless.
// Node ranks are stable across restarts (docs/rendezvous.md, "Node ranks"), so a node's attempts
// normally sit side by side; after a scale event a node may continue under another node_<R>/.
//
// <root> is --log-dir when given. Otherwise it is a private temp dir ($TMPDIR or /tmp,
// ddprun_XXXXXX) for the error files the failure summary reads: removed at exit, or kept when
// keep() was called (a failure summary names files in it) or redirects/tee wrote files there —
// never left behind empty, on any exit path that runs cleanUp() or the destructor.
//
// Thread safety: use from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "launcher/failures/kept_logs.hpp"

namespace ddp {

class LogLayout : public KeptLogs {
 public:
  // `logDir` "" = a temp dir under $TMPDIR (or /tmp). `keepTemp`: keep the temp dir at exit.
  // Creates <root>/<run-id>. Throws ConfigError naming the dir when it cannot be created.
  LogLayout(const std::string& logDir, const std::string& runId, bool keepTemp);
  // cleanUp().
  ~LogLayout();
  LogLayout(const LogLayout&) = delete;
  LogLayout& operator=(const LogLayout&) = delete;

  // This agent has node rank `nodeRank` in `generation`: that generation's paths use
  // node_<nodeRank>/ (node_0 for a generation never begun). Non-blocking.
  void beginGeneration(int64_t generation, int nodeRank);

  // Creates node_<R>/attempt_<generation>/<0..nproc-1>/ afresh (only this node's attempt folder of
  // that generation is removed first). Throws ConfigError on failure.
  void prepare(int64_t generation, int nproc) const;

  std::string workerDir(int64_t generation, int localRank) const;
  std::string stdoutPath(int64_t generation, int localRank) const;
  std::string stderrPath(int64_t generation, int localRank) const;
  std::string errorFilePath(int64_t generation, int localRank) const;
  // <root>/<run-id>
  const std::string& runDir() const { return runDir_; }
  bool isTemporary() const { return temporaryRoot_; }

  // True when `path` lies inside <root>.
  bool contains(const std::string& path) const;
  // Keeps a temporary root at exit (and says so then). No-op for --log-dir.
  void keep() { keepTemp_ = true; }
  // keep() when contains(path).
  void keepIfHolds(const std::string& path) override {
    if (contains(path)) keep();
  }
  // Removes a temporary root unless it is kept; logs where kept files are. Idempotent, never
  // throws. For exits that skip destructors (std::_Exit on a signal) as well as the destructor.
  void cleanUp();

 private:
  int nodeRankOf(int64_t generation) const;

  std::string root_;
  std::string runDir_;
  bool temporaryRoot_ = false;
  bool keepTemp_ = false;
  bool cleanedUp_ = false;
  std::map<int64_t, int> nodeRanks_;  // generation -> this agent's node rank
};

}  // namespace ddp
