// ResumableConnection: the connection of a TcpStoreClient that survives a restart of its server
// (ddprund with --data-dir), when TcpStoreClientOptions::reconnectBudget is set and the server
// granted ddprun's REQUEST_ID (wire_codec.hpp) in HELLO. Otherwise it is a StoreConnection.
//
// While resumable, every request that changes the store is sent behind a REQUEST_ID (this
// client's random id, a sequence that grows by one) and kept, encoded, until a reply shows the
// server has read past it (any reply does: a server answers in order). When the connection is
// lost, retry() reconnects with backoff within reconnectBudget (counted from the loss), says
// HELLO again, registers the ON_CLOSE actions the client holds again, sends the kept requests
// again (the server skips those it applied and answers the last with its kept reply), and runs
// the interrupted operation again: a read or WAIT is sent again, a tagged change is not (it was
// among the kept requests), only its reply is read. So a retried ADD or COMPARE_SET is applied
// once. The kept requests are bounded: past kMaxUnacked of them a PING collects an answer.
//
// Thread safety: none; TcpStoreClient serialises access.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "rendezvous/store/detail/store_connection.hpp"

namespace ddp::detail {

class ResumableConnection {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kMaxUnacked = 256;

  explicit ResumableConnection(const TcpStoreClientOptions& options);

  // StoreConnection's interface (see store_connection.hpp); send() tags changes when resumable.
  const std::string& endpoint() const { return conn_->endpoint(); }
  wire::Dialect dialect() const { return conn_->dialect(); }
  void throwIfFailed() const { conn_->throwIfFailed(); }
  bool failed() const { return conn_->failed(); }
  void send(const wire::Request& request, Clock::time_point deadline, const std::string& what);
  std::optional<wire::OwnedReply> receive(wire::Op op, std::size_t keyCount,
                                          Clock::time_point deadline, const std::string& what,
                                          int interruptFd = -1);
  wire::OwnedReply expect(wire::Op op, std::size_t keyCount, Clock::time_point deadline,
                          std::chrono::milliseconds budget, const std::string& what);
  void markFailed(std::exception_ptr error) { conn_->markFailed(std::move(error)); }
  void setFarewell(std::string bytes);
  bool closedByServer() const { return conn_->closedByServer(); }

  // After a HELLO that granted `capabilities` with `fields` (name, value, name, value, ...):
  // remembers it (to say it again after a reconnect) and becomes resumable when the server has
  // REQUEST_ID and a reconnect budget is set.
  void helloDone(uint64_t capabilities, const std::vector<std::string_view>& fields);
  // What the server said of itself in that HELLO: whether it keeps its data across a restart
  // (wire::kCapDurable) and its instance id. A store that keeps none is waited for only while it
  // is the same instance (a dropped connection), for at most kVolatileReconnect.
  void serverIdentity(bool durable, std::string instance);
  bool resumable() const { return resumable_; }
  // ON_CLOSE registrations the client holds (registered again after a reconnect).
  void noteOnClose(const std::string& key, const std::string& expected, const std::string& desired);
  void noteOnCloseClear(const std::vector<std::string>& keys);

  // Runs `op`; when the connection is lost and the client is resumable, reconnects (within the
  // budget) and runs it again. Throws what `op` throws, or the loss when the budget ran out.
  template <typename F>
  auto retry(F&& op) -> decltype(op()) {
    opSequence_ = 0;
    std::optional<Clock::time_point> until;
    for (;;) {
      try {
        return op();
      } catch (const NetworkError&) {
        if (!resumable_ || !conn_->lost()) throw;
        if (!until) until = deadlineAfter(options_.reconnectBudget);
        reconnect(*until, std::current_exception());
      }
    }
  }

  uint64_t clientId() const { return clientId_; }
  uint64_t reconnects() const { return reconnects_; }

 private:
  struct OnClose {
    std::string key, expected, desired;
  };
  void reconnect(Clock::time_point until, std::exception_ptr loss);
  void restore(Clock::time_point until);
  // "connection to the store at X lost and not regained within B: ", for the final error.
  std::string notRegained() const;
  void acknowledged() { unacked_.clear(); }

  TcpStoreClientOptions options_;
  std::unique_ptr<StoreConnection> conn_;
  bool resumable_ = false;
  uint64_t capabilities_ = 0;
  bool serverDurable_ = false;
  std::string serverInstance_;
  std::vector<std::string> helloFields_;  // name, value, name, value, ...
  std::vector<OnClose> onClose_;
  std::string farewell_;
  uint64_t clientId_ = 0;
  uint64_t nextSequence_ = 1;
  uint64_t opSequence_ = 0;  // the tag of the change the current retry() sent (0: none yet)
  std::vector<std::string> unacked_;  // tagged changes sent since the last reply, encoded
  uint64_t reconnects_ = 0;
};

}  // namespace ddp::detail
