// ConnectionHooks: what a Store connection may offer beyond the Store interface, for the
// rendezvous's heartbeat thread (which finds it with dynamic_cast and does without it otherwise).
//
//   * interruptWait(): another thread ends a blocking wait() early, so the heartbeat thread can
//     sleep *in* a wait on the round's end key (an end is seen within milliseconds) and still
//     stop or switch rounds at once.
//   * usable(): whether a wait that ended with TimeoutError was still answered (its CANCEL_WAIT
//     was), so the heartbeat thread knows when the store last answered.
//   * ON_CLOSE (ddprun's wire extension, wire_codec.hpp): "when this connection closes before I
//     clear this, COMPARE_SET key expected desired", applied by the server. A process that dies
//     closes its connections, so the job learns of a dead agent at once instead of after
//     heartbeat_timeout. Only a TcpStoreClient to ddprund or an embedded StoreServer has it
//     (onCloseSupported()); torch's TCPStore server, etcd and the in-memory store do not.
//
// Implemented by TcpStoreClient (both) and InMemoryStore (interruptWait only).
// Thread safety: interruptWait() is safe from any thread at any time and never blocks; the others
// follow the Store's rules.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"

namespace ddp {

class ConnectionHooks {
 public:
  virtual ~ConnectionHooks() = default;

  // Ends a wait in progress on this connection (wait(), or the wait inside get()/multiGet())
  // early, as if its timeout had passed (TimeoutError; a v2 TcpStoreClient stays usable). With no
  // wait in progress, the next wait that would block ends at once (the interrupt is latched until
  // a wait consumes it). Non-blocking.
  virtual void interruptWait() = 0;

  // True when the server applies ON_CLOSE registrations of this connection.
  virtual bool onCloseSupported() const { return false; }

  // False once this connection failed for good (a sticky error: its next call throws it), e.g.
  // after a wait whose CANCEL_WAIT the server never answered; a wait that merely timed out leaves
  // it usable. Non-blocking; call it from the thread that uses the connection.
  virtual bool usable() const { return true; }

  // Registers (or replaces, for the same key) "on close: COMPARE_SET key expected desired".
  // Blocks up to the store's timeout(). Throws ProtocolError when unsupported or refused (too
  // many registrations), and what the Store's calls throw.
  virtual void armOnClose(const std::string& key, const std::string& expected,
                          const std::string& desired) {
    (void)expected;
    (void)desired;
    throw ProtocolError("this store connection has no ON_CLOSE (arming '" + key + "')");
  }

  // Removes the registrations of `keys` (all of them when empty). Same blocking and errors.
  virtual void clearOnClose(const std::vector<std::string>& keys) {
    (void)keys;
    throw ProtocolError("this store connection has no ON_CLOSE");
  }
};

}  // namespace ddp
