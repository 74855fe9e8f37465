// StoreSession: the transport side of one admitted TCPStore connection of a StoreServer; what it
// reads and writes goes through its SessionProtocol (decoding, the store, replies, memory, the
// token check). The bytes travel through a SessionStream (plain TCP or TLS, chosen by Admission
// before the session starts, admission.hpp).
//
// A session reads into the protocol's input buffer (small while idle, grown on demand), has every
// complete request applied, and writes the queued replies with one gather write per batch
// (pipelined requests get batched replies; large values are written from the store's own bytes).
// A WAIT parks nothing but a counter in the StoreState; the session keeps reading (CANCEL_WAIT
// must get through) unless its client stops reading replies (backlog). Malformed or over-limit
// input, or a request the memory budget cannot hold, closes only this session, with a
// rate-limited warning naming the peer and the reason. Idle sessions are kept forever (no idle
// timeout: jobs hold store connections for days). The one timer is the v1 opcode-8 grace period
// (see wire_codec.hpp), created only when needed. When the peer closes (or the connection breaks,
// or its input is malformed) the session's ON_CLOSE registrations are applied and logged at info;
// when the server stops they are not. A request the token check refuses closes the session (after
// HELLO's refusal reply is written, when it was a HELLO). On a server with a token, a session that
// has not presented it yet is counted in core.unauthenticated, which may close it (expel()).
//
// Thread safety: everything runs on the server's io_context thread; no locks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/server/detail/server_core.hpp"
#include "rendezvous/server/detail/session_protocol.hpp"
#include "rendezvous/server/detail/session_stream.hpp"

namespace ddp::detail {

class StoreSession final : public SessionProtocol,
                           public UnauthenticatedConnections::Member,
                           public std::enable_shared_from_this<StoreSession> {
 public:
  // `identity`: who admission found the peer to be (admission.hpp).
  StoreSession(SessionStream stream, std::shared_ptr<ServerCore> core, const PeerIdentity& identity);
  ~StoreSession() override;

  // Registers with the core and starts reading. Non-blocking.
  void start();
  // Closes the socket and drops the session's waits; logs `reason` (rate-limited) when non-empty.
  void close(const std::string& reason);

  // UnauthenticatedConnections::Member: closed before it presented the token.
  void expel(const std::string& reason) override;

 protected:
  void repliesReady() override { flush(); }

 private:
  bool stopped() const { return closed_ || core_->stopped; }
  void readMore();
  void onRead(const boost::system::error_code& ec, std::size_t n);
  // Acts on what the protocol decided after a read or the grace period. False if it closed or
  // closes once its last replies are written (read no more).
  bool follow(Outcome outcome);
  void armGraceTimer();
  void flush();
  void onWrite(const boost::system::error_code& ec);

  SessionStream stream_;
  std::unique_ptr<boost::asio::steady_timer> graceTimer_;  // only while a v1 opcode 8 is pending
  OutputQueue writing_;                                     // replies being written
  std::vector<boost::asio::const_buffer> gather_;
  bool writeActive_ = false;
  bool readActive_ = false;
  bool ambiguous_ = false;
  bool closed_ = false;
  bool closeWhenWritten_ = false;  // a refusal reply is pending: close once it is written
  bool awaitingDurable_ = false;  // replies held until the journal has synced what they follow
};

}  // namespace ddp::detail
