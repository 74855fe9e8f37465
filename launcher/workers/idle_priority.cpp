#include "launcher/workers/idle_priority.hpp"

#include <sched.h>

#include <thread>

#include "launcher/workers/proc_info.hpp"

namespace ddp {
namespace {

// Moves the SCHED_IDLE threads of `pid` and of every process below it to `policy`; returns how many.
int moveTree(pid_t pid, int policy) {
  int moved = 0;
  for (pid_t p : processTree(pid)) {
    for (pid_t tid : threadsOf(p)) {
      const sched_param none{};
      if (::sched_getscheduler(tid) == SCHED_IDLE &&
          ::sched_setscheduler(tid, policy, &none) == 0) {
        ++moved;
      }
    }
  }
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
