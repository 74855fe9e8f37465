// StoreSession: one accepted TCPStore connection of a StoreServer, and ServerCore, the state the
// sessions of one server share.
//
// A session reads into a growing buffer, decodes every complete request with its RequestDecoder,
// applies each to the shared StoreState and appends the replies to one output buffer that is
// written once per read (batched replies for pipelined requests). A WAIT parks nothing but a
// counter in the StoreState; the session keeps reading (CANCEL_WAIT must get through). Malformed
// or over-limit input closes only this session, with a log line naming the peer and the reason.
// Idle sessions are kept forever (no idle timeout: jobs hold store connections for days). The one
// timer is the v1 opcode-8 grace period (see wire_codec.hpp). The session reads and writes through
// a SessionStream (plain TCP or TLS, chosen by Admission before the session starts); on a server
// with a token, SessionAuth decides whether each request may be applied (a refused one closes the
// connection, after HELLO's refusal reply when it was a HELLO). When the peer closes (or the
// connection breaks, or its input is malformed) the session's ON_CLOSE registrations are applied
// and logged at info; when the server stops they are not.
//
// Thread safety: everything runs on the server's io_context thread; no locks.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "rendezvous/server/detail/refusal_log.hpp"
#include "rendezvous/server/detail/session_auth.hpp"
#include "rendezvous/server/detail/session_stream.hpp"
#include "rendezvous/server/detail/store_state.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

class StoreSession;
class TlsAdmission;

// What every session of one server shares. Owned by the server, kept alive by its sessions.
struct ServerCore {
  StoreServerOptions options;
  StoreState state;
  StoreStats stats;
  std::shared_ptr<spdlog::logger> log;
  std::unordered_set<StoreSession*> sessions;
  bool stopped = false;
  uint64_t nextSessionId = 1;
  // Transport and admission (admission.hpp): the TLS context when options.tls is enabled,
  // connections still in their TLS handshake, the rate-limited log of refused clients.
  std::shared_ptr<boost::asio::ssl::context> tls;
  std::unordered_set<TlsAdmission*> handshaking;
  RefusalLog refusals;
  bool ownerLookupWarned = false;
};

class StoreSession final : public StoreClient, public std::enable_shared_from_this<StoreSession> {
 public:
  StoreSession(SessionStream stream, std::shared_ptr<ServerCore> core);
  ~StoreSession() override;

  // Registers with the core and starts reading. Non-blocking.
  void start();
  // Closes the socket and drops the session's waits; logs `reason` at warn when non-empty.
  void close(const std::string& reason);

 protected:
  void onWaitComplete() override;

 private:
  bool stopped() const { return closed_ || core_->stopped; }
  void readMore();
  void onRead(const boost::system::error_code& ec, std::size_t n);
  // Decodes and applies every complete request in the input buffer. False if it closed.
  bool processInput();
  void armGraceTimer();
  void noteHello(const wire::Request& hello);
  // False when `request` must not be applied: the session then refused it (logged, answered a
  // HELLO, and closes once that answer is written).
  bool admitRequest(const wire::Request& request);
  void applyOnClose(const std::vector<AppliedOnClose>& applied);
  void flush();
  void onWrite(const boost::system::error_code& ec);
  bool outputBacklogged() const;

  SessionStream stream_;
  std::shared_ptr<ServerCore> core_;
  boost::asio::steady_timer graceTimer_;
  wire::RequestDecoder decoder_;
  std::string peer_;
  std::string client_;  // " (client=ddprun, host=..., ...)" once it said HELLO, for log lines
  uint64_t id_ = 0;
  wire::Dialect loggedDialect_ = wire::Dialect::kUnknown;
  SessionAuth auth_;

  std::vector<char> in_;      // bytes [inBegin_, inEnd_) are received, not yet consumed
  std::size_t inBegin_ = 0;
  std::size_t inEnd_ = 0;
  std::size_t inNeeded_ = 0;  // from NeedMore: total unconsumed bytes needed for the next request
  std::chrono::steady_clock::time_point readAt_{};  // when the last read completed (StoreStats)
  std::string out_;           // replies not yet handed to the socket
  std::string writing_;       // replies being written
  bool writeActive_ = false;
  bool readActive_ = false;
  bool processing_ = false;
  bool ambiguous_ = false;
  bool closed_ = false;
  bool closeAfterWrite_ = false;  // a refusal reply is pending: close once it is written
};

}  // namespace ddp::detail
