#include "rendezvous/server/detail/refusal_log.hpp"

namespace ddp::detail {

void RefusalLog::refused(spdlog::logger& log, const std::string& server, const std::string& peer,
                         RefusalKind kind, const std::string& reason, Clock::time_point now) {
  ++total_;
  Window& w = windows_[static_cast<std::size_t>(kind)];
  if (w.logged && now - w.lastLine < window_) {
    ++w.suppressed;
    return;
  }
  const std::string more =
      w.suppressed == 0 ? std::string()
                        : " (" + std::to_string(w.suppressed) + " more refused since the last such line)";
  log.warn("{}: refused a connection from {}: {}{}", server, peer, reason, more);
  w.logged = true;
  w.lastLine = now;
  w.suppressed = 0;
}

void RefusalLog::flush(spdlog::logger& log, const std::string& server) {
  for (Window& w : windows_) {
    if (w.suppressed == 0) continue;
    log.warn("{}: {} more connection{} refused since the last such line", server, w.suppressed,
             w.suppressed == 1 ? "" : "s");
    w.suppressed = 0;
  }
}

}  // namespace ddp::detail
