#include "rendezvous/server/detail/unauthenticated.hpp"

#include <utility>

#include "rendezvous/base/duration_text.hpp"

namespace ddp::detail {

UnauthenticatedConnections::UnauthenticatedConnections(boost::asio::any_io_executor io,
                                                       Limits limits)
    : limits_(limits), timer_(std::move(io)) {
  if (limits_.perPeer == 0) limits_.perPeer = 1;
  if (limits_.total == 0) limits_.total = 1;
}

void UnauthenticatedConnections::add(uint64_t id, Member& member, const std::string& peer) {
  if (stopped_) return;
  auto& mine = byPeer_[peer];
  if (mine.size() >= limits_.perPeer) {
    expel(*mine.begin(), "closed to make room: " + std::to_string(mine.size()) +
                             " connections without the token are open from " + peer +
                             " (--max-unauthenticated-per-peer)");
  }
  if (byArrival_.size() >= limits_.total) {
    expel(byArrival_.begin()->first, "closed to make room: " + std::to_string(byArrival_.size()) +
                                         " connections without the token are open (at most "
                                         "half of the connection limit)");
  }
  const auto deadline = limits_.helloTimeout.count() > 0 ? Clock::now() + limits_.helloTimeout
                                                         : Clock::time_point::max();
  byArrival_.emplace(id, Entry{&member, peer, deadline});
  byPeer_[peer].insert(id);  // again: expel() may have dropped the peer's (empty) set
  if (!timerArmed_) arm();
}

void UnauthenticatedConnections::remove(uint64_t id) {
  const auto it = byArrival_.find(id);
  if (it == byArrival_.end()) return;
  const auto peer = byPeer_.find(it->second.peer);
  if (peer != byPeer_.end()) {
    peer->second.erase(id);
    if (peer->second.empty()) byPeer_.erase(peer);
  }
  byArrival_.erase(it);
}

void UnauthenticatedConnections::stop() {
  stopped_ = true;
  timer_.cancel();
}

void UnauthenticatedConnections::expel(uint64_t id, const std::string& reason) {
  const auto it = byArrival_.find(id);
  if (it == byArrival_.end()) return;
  Member* member = it->second.member;
  remove(id);
  ++closed_;
  member->expel(reason);
}

void UnauthenticatedConnections::arm() {
  if (stopped_ || byArrival_.empty() || limits_.helloTimeout.count() <= 0) return;
  timerArmed_ = true;
  timer_.expires_at(byArrival_.begin()->second.deadline);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;  // cancelled: the server stopped (the tracker may be gone)
    timerArmed_ = false;
    expire();
  });
}

void UnauthenticatedConnections::expire() {
  const auto now = Clock::now();
  while (!stopped_ && !byArrival_.empty() && byArrival_.begin()->second.deadline <= now) {
    expel(byArrival_.begin()->first, "no HELLO with the token within " +
                                         durationText(limits_.helloTimeout) + " (--hello-timeout)");
  }
  arm();
}

}  // namespace ddp::detail
