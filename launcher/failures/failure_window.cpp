#include "launcher/failures/failure_window.hpp"

#include <signal.h>

#include "launcher/failures/verdict.hpp"
#include "rendezvous/base/duration_text.hpp"

namespace ddp {

namespace {

bool stopSignal(int signal) { return signal == SIGTERM || signal == SIGINT || signal == SIGHUP; }

}  // namespace

bool countsAgainstNode(const WorkerFailure& f) {
  if (f.stoppedByAgent) return false;
  if (!f.hang.empty()) return !f.waitsForPeer;
  // A worker a signal ended failed by itself, whatever its stderr said earlier (a survivor of a
  // peer's failure logs the connection error it recovered from).
  if (f.signal != 0) return !stopSignal(f.signal);
  if (f.exitCode > 128) return !stopSignal(f.exitCode - 128);
  return !isCommunicationFailure(f);
}

std::optional<std::string> FailureWindow::record(const std::vector<WorkerFailure>& failures,
                                                 Clock::time_point now) {
  if (settings_.after < 1) return std::nullopt;
  const WorkerFailure* last = nullptr;
  for (const auto& f : failures) {
    if (countsAgainstNode(f)) last = &f;
  }
  if (last == nullptr) return std::nullopt;
  times_.push_back(now);
  while (!times_.empty() && now - times_.front() > settings_.window) times_.pop_front();
  while (times_.size() > static_cast<size_t>(settings_.after)) times_.pop_front();
  if (times_.size() < static_cast<size_t>(settings_.after)) return std::nullopt;
  return std::to_string(settings_.after) + " failure(s) of this node's workers within " +
         durationText(settings_.window) + " (--exclude-after " + std::to_string(settings_.after) +
         ", --exclude-window " + durationText(settings_.window) + "; the last: " +
         causeText(*last) + ")";
}

}  // namespace ddp
