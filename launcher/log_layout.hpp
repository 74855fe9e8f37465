// LogLayout: where a worker's files live —
//   <root>/<run-id>/attempt_<generation>/<local_rank>/{stdout.log, stderr.log, error.json}
// (torchrun's layout without its random suffix; the run id is already unique per job).
//
// <root> is --log-dir when given; otherwise a private temp dir (for the error files the failure
// summary reads), removed at exit unless it holds redirected output the user asked for.
//
// Thread safety: use from one thread.
#pragma once

#include <cstdint>
#include <string>

namespace ddp {

class LogLayout {
 public:
  // `logDir` "" = a temp dir under $TMPDIR (or /tmp). `keepTemp`: keep the temp dir at exit.
  // Throws ConfigError naming the dir when it cannot be created.
  LogLayout(const std::string& logDir, const std::string& runId, bool keepTemp);
  ~LogLayout();
  LogLayout(const LogLayout&) = delete;
  LogLayout& operator=(const LogLayout&) = delete;

  // Creates attempt_<generation>/<0..nproc-1>/ afresh (an earlier attempt dir with that number is
  // removed first). Throws ConfigError on failure.
  void prepare(int64_t generation, int nproc) const;

  std::string workerDir(int64_t generation, int localRank) const;
  std::string stdoutPath(int64_t generation, int localRank) const;
  std::string stderrPath(int64_t generation, int localRank) const;
  std::string errorFilePath(int64_t generation, int localRank) const;
  // <root>/<run-id>
  const std::string& runDir() const { return runDir_; }
  bool isTemporary() const { return temporaryRoot_; }

 private:
  std::string root_;
  std::string runDir_;
  bool temporaryRoot_ = false;
  bool keepTemp_ = false;
};

}  // namespace ddp
