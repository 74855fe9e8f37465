#include "launcher/hang/hang_watch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "rendezvous/base/duration_text.hpp"

namespace ddp {

HangWatch::HangWatch(std::chrono::milliseconds timeout, std::vector<pid_t> workerPids,
                     Clock::time_point start)
    : timeout_(timeout) {
  for (pid_t pid : workerPids) {
    Worker w;
    w.pid = pid;
    w.lastProgress = start;
    workers_.push_back(std::move(w));
  }
}

void HangWatch::beat(int lr, std::optional<int64_t> step, Clock::time_point now) {
  Worker& w = workers_.at(static_cast<std::size_t>(lr));
  if (!w.watched) return;
  w.beats = true;
  w.lastProgress = now;
  w.lastEvent = ++events_;
  if (step) w.lastStep = step;
}

void HangWatch::activity(int lr, Clock::time_point now) {
  Worker& w = workers_.at(static_cast<std::size_t>(lr));
  if (!w.watched || w.beats) return;  // a beating worker promised beats: only they count
  w.lastProgress = now;
  w.lastEvent = ++events_;
}

void HangWatch::acquire(int lr, pid_t pid, const std::string& scope, double deadlineUnix,
                        int signal) {
  Worker& w = workers_.at(static_cast<std::size_t>(lr));
  if (w.watched) w.timers[{pid, scope}] = Timer{deadlineUnix, signal};
}

void HangWatch::release(int lr, pid_t pid, const std::string& scope) {
  workers_.at(static_cast<std::size_t>(lr)).timers.erase({pid, scope});
}

void HangWatch::exited(int lr) {
  Worker& w = workers_.at(static_cast<std::size_t>(lr));
  w.watched = false;
  w.timers.clear();
}

void HangWatch::restarted(int lr, pid_t pid, Clock::time_point now) {
  Worker& w = workers_.at(static_cast<std::size_t>(lr));
  w = Worker{};
  w.pid = pid;
  w.lastProgress = now;
}

bool HangWatch::needsSampling(int lr) const {
  const Worker& w = workers_.at(static_cast<std::size_t>(lr));
  return timeout_.count() > 0 && w.watched && !w.beats;
}

std::string HangWatch::silence(const Worker& w, Clock::time_point now) const {
  const double silent = std::chrono::duration<double>(now - w.lastProgress).count();
  if (w.beats) {
    return "no progress report for " + secondsText(std::chrono::duration<double>(silent)) +
           (w.lastStep ? " (last report: step " + std::to_string(*w.lastStep) + ")" : "");
  }
  return "no output, CPU time or timer request for " + secondsText(std::chrono::duration<double>(silent));
}

// torch's rule: per process, the earliest expired timer with a signal; the rest without one are
// dropped with a note.
void HangWatch::expiredTimers(double nowUnix, HangCheck& out) {
  std::vector<std::pair<double, HangVerdict>> found;
  for (std::size_t lr = 0; lr < workers_.size(); ++lr) {
    Worker& w = workers_[lr];
    const Timer* first = nullptr;
    std::pair<pid_t, std::string> firstKey;
    for (auto it = w.timers.begin(); it != w.timers.end();) {
      const auto& [key, timer] = *it;
      if (timer.deadlineUnix > nowUnix) {
        ++it;
      } else if (timer.signal <= 0) {
        out.notes.push_back("file timer '" + key.second + "' of pid " + std::to_string(key.first) +
                            " expired; it names no signal, so the process is left running (as "
                            "torch does)");
        it = w.timers.erase(it);
      } else {
        if (first == nullptr || timer.deadlineUnix < first->deadlineUnix) {
          first = &timer;
          firstKey = key;
        }
        ++it;
      }
    }
    if (first == nullptr || !w.watched) continue;
    HangVerdict v;
    v.localRank = static_cast<int>(lr);
    v.target = firstKey.first;
    v.signal = first->signal;
    v.reason = "file timer '" + firstKey.second + "' of pid " + std::to_string(firstKey.first) +
               " expired " + secondsText(std::chrono::duration<double>(std::max(0.0, nowUnix - first->deadlineUnix))) + " ago";
    found.emplace_back(first->deadlineUnix, std::move(v));
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [deadline, v] : found) {
    Worker& w = workers_[static_cast<std::size_t>(v.localRank)];
    w.watched = false;
    w.timers.clear();
    out.hangs.push_back(std::move(v));
  }
}

void HangWatch::silentWorkers(Clock::time_point now, HangCheck& out) {
  if (timeout_.count() <= 0) return;
  const auto silentFor = [&](const Worker& w) { return now - w.lastProgress; };
  const bool anyHung = std::any_of(workers_.begin(), workers_.end(), [&](const Worker& w) {
    return w.watched && silentFor(w) >= timeout_;
  });
  if (!anyHung) return;
  std::vector<std::size_t> hung;
  for (std::size_t lr = 0; lr < workers_.size(); ++lr) {
    if (workers_[lr].watched && silentFor(workers_[lr]) >= timeout_ / 2) hung.push_back(lr);
  }
  std::sort(hung.begin(), hung.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(workers_[a].lastEvent, a) < std::tie(workers_[b].lastEvent, b);
  });
  for (std::size_t lr : hung) {
    Worker& w = workers_[lr];
    out.hangs.push_back(HangVerdict{static_cast<int>(lr), w.pid, 0, silence(w, now)});
    w.watched = false;
    w.timers.clear();
  }
}

HangCheck HangWatch::check(Clock::time_point now, double nowUnix) {
  HangCheck out;
  expiredTimers(nowUnix, out);
  silentWorkers(now, out);
  return out;
}

std::optional<HangWatch::Clock::time_point> HangWatch::nextDeadline(Clock::time_point now,
                                                                    double nowUnix) const {
  std::optional<Clock::time_point> next;
  const auto consider = [&](Clock::time_point t) {
    if (!next || t < *next) next = t;
  };
  for (const Worker& w : workers_) {
    if (!w.watched) continue;
    if (timeout_.count() > 0) consider(w.lastProgress + timeout_);
    for (const auto& [key, timer] : w.timers) {
      const double in = std::max(0.0, timer.deadlineUnix - nowUnix);
      consider(now + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(in)));
    }
  }
  return next;
}

}  // namespace ddp
