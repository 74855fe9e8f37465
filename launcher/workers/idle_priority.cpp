#include "launcher/workers/idle_priority.hpp"

#include <dirent.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "launcher/workers/process_tree.hpp"

namespace ddp {
namespace {

// The threads of `pid` (its /proc/<pid>/task entries); empty once it is gone.
std::vector<pid_t> threadsOf(pid_t pid) {
  std::vector<pid_t> tids;
  const std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return tids;
  while (const dirent* e = ::readdir(d)) {
    const pid_t tid = pid_t(std::atoi(e->d_name));
    if (tid > 0) tids.push_back(tid);
  }
  ::closedir(d);
  return tids;
}

// The children of `pid`: its threads' /proc/<pid>/task/<tid>/children (CONFIG_PROC_CHILDREN), else
// a pass over every /proc/<pid>/stat (process_tree.hpp).
std::vector<pid_t> childrenOf(pid_t pid, const std::vector<pid_t>& tids) {
  std::vector<pid_t> children;
  bool listed = false;
  for (pid_t tid : tids) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/children");
    if (!in) continue;
    listed = true;
    for (pid_t child; in >> child;) children.push_back(child);
  }
  if (!listed && !tids.empty()) {
    forEachChild(
        pid, [](pid_t c, void* ctx) { static_cast<std::vector<pid_t>*>(ctx)->push_back(c); },
        &children);
  }
  return children;
}

// Moves the SCHED_IDLE threads of `pid` and of every process below it to `policy`; returns how many.
int moveTree(pid_t pid, int policy) {
  int moved = 0;
  const std::vector<pid_t> tids = threadsOf(pid);
  for (pid_t tid : tids) {
    const sched_param none{};
    if (::sched_getscheduler(tid) == SCHED_IDLE && ::sched_setscheduler(tid, policy, &none) == 0) {
      ++moved;
    }
  }
  for (pid_t child : childrenOf(pid, tids)) moved += moveTree(child, policy);
  return moved;
}

}  // namespace

int probeIdleReturnPolicy() {
  const int own = ::sched_getscheduler(0);
  if (own != SCHED_OTHER && own != SCHED_BATCH) return -1;
  bool ok = false;
  std::thread probe([&ok, own] {
    const sched_param none{};
    ok = ::sched_setscheduler(0, SCHED_IDLE, &none) == 0 &&
         ::sched_setscheduler(0, own, &none) == 0;
  });
  probe.join();
  return ok ? own : -1;
}

int idleReturnPolicy() {
  static const int policy = probeIdleReturnPolicy();
  return policy;
}

int leaveIdlePriority(pid_t pid, int policy) {
  int moved = 0;
  for (int pass = 0; pass < 8; ++pass) {
    const int movedNow = moveTree(pid, policy);
    moved += movedNow;
    if (movedNow == 0) break;
  }
  return moved;
}

}  // namespace ddp
