// KeptLogs: what the failure summary needs of the workers' log dir (LogLayout implements it). A
// summary that shows a file of this node (an error file, a stacks file) keeps the temporary log
// dir holding it, so the path it prints still exists after ddprun exits.
//
// Thread safety: as the implementation's (LogLayout: one thread).
#pragma once

#include <string>

namespace ddp {

class KeptLogs {
 public:
  virtual ~KeptLogs() = default;
  // Keeps the log dir at exit when `path` lies inside it. Non-blocking; never throws.
  virtual void keepIfHolds(const std::string& path) = 0;
};

}  // namespace ddp
