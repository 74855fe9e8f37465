#include "launcher/workers/idle_priority.hpp"

#include <dirent.h>
#include <sched.h>

#include <cstdlib>
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

void collectTree(pid_t pid, std::vector<pid_t>& out) {
  out.push_back(pid);
  std::vector<pid_t> children;
  forEachChild(
      pid, [](pid_t child, void* ctx) { static_cast<std::vector<pid_t>*>(ctx)->push_back(child); },
      &children);
  for (pid_t c : children) collectTree(c, out);
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
    int movedNow = 0;
    std::vector<pid_t> tree;
    collectTree(pid, tree);
    for (pid_t p : tree) {
      for (pid_t tid : threadsOf(p)) {
        const sched_param none{};
        if (::sched_getscheduler(tid) == SCHED_IDLE &&
            ::sched_setscheduler(tid, policy, &none) == 0) {
          ++movedNow;
        }
      }
    }
    moved += movedNow;
    if (movedNow == 0) break;
  }
  return moved;
}

}  // namespace ddp
