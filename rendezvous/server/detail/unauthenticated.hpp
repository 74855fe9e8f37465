// UnauthenticatedConnections: on a server with a token, the connections that have not presented
// it yet, bounded so that strangers cannot crowd out the clients that hold it (a user without the
// token holding thousands of idle connections must not keep a job from starting):
//   - each gets `helloTimeout` to authenticate; then it is closed;
//   - at most `perPeer` at once from one peer — a local user (uid) or a remote address; one more
//     closes that peer's oldest;
//   - at most `total` at once; one more closes the oldest of all. A real client authenticates
//     within a round trip of connecting, a flood's connections sit idle: the oldest is a
//     stranger's.
// A closed member is told why through Member::expel() (the session logs a rate-limited refusal
// and closes). Deadlines follow arrival order, so one timer (for the oldest) serves them all.
//
// Thread safety: the server's io_context thread only.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>

namespace ddp::detail {

class UnauthenticatedConnections {
 public:
  using Clock = std::chrono::steady_clock;

  struct Limits {
    std::chrono::milliseconds helloTimeout{10000};  // 0: no deadline
    std::size_t perPeer = 64;
    std::size_t total = 1024;
  };
  // What the tracker closes: a session that has not authenticated.
  class Member {
   public:
    // Close at once; `reason` is for the refusal log. Must call remove() (directly or not).
    virtual void expel(const std::string& reason) = 0;

   protected:
    ~Member() = default;
  };

  UnauthenticatedConnections(boost::asio::any_io_executor io, Limits limits);

  // Counts `member` (connection `id`: ids grow with arrival) from `peer` ("uid 65534",
  // "10.0.0.3"); closes the oldest of the peer's, or of all, when a cap is reached.
  void add(uint64_t id, Member& member, const std::string& peer);
  // `id` authenticated or closed: no longer counted. Idempotent.
  void remove(uint64_t id);
  // Counted now.
  std::size_t size() const { return byArrival_.size(); }
  // Members closed so far (deadline passed or a cap reached).
  uint64_t closed() const { return closed_; }
  const Limits& limits() const { return limits_; }
  // The server stops: no more deadlines.
  void stop();

 private:
  struct Entry {
    Member* member;
    std::string peer;
    Clock::time_point deadline;
  };
  void expel(uint64_t id, const std::string& reason);
  void arm();
  void expire();

  Limits limits_;
  std::map<uint64_t, Entry> byArrival_;
  std::unordered_map<std::string, std::set<uint64_t>> byPeer_;
  boost::asio::steady_timer timer_;
  bool timerArmed_ = false;
  bool stopped_ = false;
  uint64_t closed_ = 0;
};

}  // namespace ddp::detail
