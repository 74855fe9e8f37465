#include "launcher/workers/signal_rules.hpp"

#include <signal.h>

namespace ddp {

bool asksToStop(int signo) {
  return signo == SIGTERM || signo == SIGINT || signo == SIGHUP || signo == SIGQUIT;
}

SignalAction SignalTally::onSignal(const ReceivedSignal& s, bool stopping) {
  if (s.signo == SIGINT && !s.relay && ++interrupts_ >= 2) return SignalAction::kKillNow;
  const bool again = !forwarded_.insert(s.signo).second;
  if (asksToStop(s.signo)) {
    if (again) return SignalAction::kDrop;
    return stopping ? SignalAction::kForward : SignalAction::kStop;
  }
  return again && s.relay ? SignalAction::kDrop : SignalAction::kForward;
}

}  // namespace ddp
