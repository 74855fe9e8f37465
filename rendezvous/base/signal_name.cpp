#include "rendezvous/base/signal_name.hpp"

#include <string.h>

namespace ddp {

std::string signalName(int signo) {
  const char* abbrev = ::sigabbrev_np(signo);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

}  // namespace ddp
