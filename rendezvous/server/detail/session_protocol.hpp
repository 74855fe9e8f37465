// SessionProtocol: everything one store connection does between its transport and the
// StoreState, without I/O — the state machine the fuzzer drives directly.
//
// Bytes come in through readBuffer()/received(): every complete request is decoded (parsing
// resumes where the previous read stopped), applied to the shared StoreState in order, and its
// reply queued in output(). The transport (StoreSession) writes output() out, stops reading while
// backlogged() and closes the connection when an outcome says so, logging closeReason().
// Memory is charged to the server's budget: the input buffer reserves what a partial request
// declares (refused before it is buffered when the budget cannot hold it), replies are charged
// as they are queued, and the decoder's key views are charged while a key list is parsed.
// On a server with a token, SessionAuth (session_auth.hpp) decides before each request whether it
// may be applied: a refused request closes the connection (logged in the core's RefusalLog, not as
// bad input), after HELLO's refusal reply when it was a HELLO (kCloseWhenWritten).
//
// Thread safety: none; the server's io_context thread owns a protocol and calls everything on it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "rendezvous/server/detail/input_buffer.hpp"
#include "rendezvous/server/detail/output_queue.hpp"
#include "rendezvous/server/detail/server_core.hpp"
#include "rendezvous/server/detail/session_auth.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::detail {

// Who a connection's peer is, as admission found it (admission.hpp): for the token check and the
// bounds on unauthenticated connections.
struct PeerIdentity {
  std::string key;           // "uid 1000" for a local process, else the address ("10.0.0.3")
  bool tokenExempt = false;  // served without the token (options.allowUnauthenticated)
};

class SessionProtocol : public ServerConnection {
 public:
  enum class Outcome {
    kContinue,   // keep reading
    kAmbiguous,  // a lone v1 opcode 8: call resolveAmbiguity() after the grace period unless
                 // more bytes arrive first
    kClose,      // close the connection; closeReason() says why (empty: orderly)
    kCloseWhenWritten,  // write what output() holds (a refusal), then close; read nothing more
  };

  // `peer` names the remote end in log lines ("10.0.0.2:41234"); `identity`: who it is (no token
  // needed when identity.tokenExempt).
  SessionProtocol(std::shared_ptr<ServerCore> core, std::string peer, PeerIdentity identity = {});
  ~SessionProtocol() override;

  // Where the next read goes (at least one byte). nullopt: the pending request cannot fit in the
  // memory budget; the connection must close with closeReason().
  std::optional<std::span<char>> readBuffer();
  // `n` bytes were read into readBuffer(): decodes and applies every complete request.
  Outcome received(std::size_t n);
  // The v1 opcode-8 grace period ended without more bytes: DELETE_KEY it is.
  Outcome resolveAmbiguity();
  // Drops the connection's waits and applies its ON_CLOSE registrations when `applyOnClose`
  // (logged). Idempotent.
  void disconnect(bool applyOnClose);

  // Replies owed and not yet handed to the transport.
  OutputQueue& output() { return out_; }
  // True while so much output is pending that the transport should stop reading.
  bool backlogged(std::size_t inFlight) const { return out_.size() + inFlight > kMaxBacklog; }
  const std::string& closeReason() const { return reason_; }
  const std::string& peer() const { return peer_; }
  uint64_t id() const { return id_; }
  // "uid 1000" or the peer's address (PeerIdentity::key).
  const std::string& peerKey() const { return peerKey_; }
  bool authenticated() const { return auth_.authenticated(); }
  wire::Dialect dialect() const { return decoder_.dialect(); }
  // Bytes of the input buffer (for tests of the per-connection footprint).
  std::size_t inputCapacity() const { return input_.capacity(); }

  // Stop reading from a client that does not read its replies once this much output is pending.
  static constexpr std::size_t kMaxBacklog = 4 * 1024 * 1024;

 protected:
  void onWaitComplete() override;
  // Replies were queued outside received() (a wait completed): the transport should write them.
  virtual void repliesReady() {}

  std::shared_ptr<ServerCore> core_;

 private:
  Outcome process();
  bool handle(const wire::Request& request);
  void noteHello(const wire::Request& hello);
  // nullopt when `request` may be applied; else what the refusal means for the connection (the
  // refusal is logged and, for a HELLO, answered).
  std::optional<Outcome> admit(const wire::Request& request);
  Outcome fail(std::string reason, bool memory);

  wire::RequestDecoder decoder_;
  InputBuffer input_;
  OutputQueue out_;
  Charge decoderCharge_;
  std::size_t need_ = 0;  // from NeedMore: bytes the pending request needs in all
  std::string peer_;
  std::string peerKey_;
  std::string client_;    // " (client=ddprun, host=..., ...)" once it said HELLO, for log lines
  std::string reason_;
  uint64_t id_ = 0;
  wire::Dialect loggedDialect_ = wire::Dialect::kUnknown;
  SessionAuth auth_;
  bool processing_ = false;
  std::chrono::steady_clock::time_point readAt_{};  // when the last read completed (StoreStats)
  bool disconnected_ = false;
  // REQUEST_ID (client id, sequence) for the next request, once received.
  std::optional<std::pair<uint64_t, uint64_t>> tag_;
};

}  // namespace ddp::detail
