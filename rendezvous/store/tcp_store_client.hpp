// TcpStoreClient: a Store over one TCP connection to ddprund, an embedded StoreServer or a c10d
// TCPStore server.
//
// Speaks the v2 dialect by default: connect (with backoff until connectTimeout), VALIDATE magic,
// PING with this process's pid as nonce (the echo is checked; so v2 needs a server that answers
// PING: ddprund, StoreServer, torch >= 2.5). A wait that times out sends
// CANCEL_WAIT and reads the server's answer, so the connection stays in step and usable.
// get(k) is WAIT [k] + GET k and multiGet is WAIT [keys] + MULTI_GET, as torch's client does.
//
// The v1a dialect talks to torch 1.13/2.0's own TCPStore server. It has no CANCEL_WAIT, so a wait
// that times out leaves a WAIT parked on the server whose late `00` reply would desynchronise the
// stream: after a v1a wait timeout (TimeoutError) the client is unusable and every later call
// throws NetworkError. multiGet (WAIT + GETs), multiSet (SETs, not atomic) and append (a
// CHECK/GET/COMPARE_SET retry loop; torch 1.13's server does not wake waiters when a
// COMPARE_SET creates a key, so there an append that creates a key wakes nobody) are composed
// from v1a requests.
//
// Keys go on the wire verbatim. torch's TCPStore puts "/" in front of every key: to share keys with
// torch clients wrap this client in PrefixStore("", client) (wire key "/" + key).
//
// Every call that waits for the server is bounded: wait(keys, t) by t; get/multiGet by timeout();
// every other reply by timeout() as well (a missing reply then is a TimeoutError and, since the
// stream is out of step, sticky as NetworkError); the CANCEL_WAIT after a wait timeout by
// min(30 s, timeout()). So setTimeout() on a client of one's own gives per-call deadlines.
//
// ddprun's wire extension (wire_codec.hpp; ddprund and StoreServer have it, torch's servers do
// not): hello() asks the server for capabilities; after it granted kCapOnClose, armOnClose()
// registers a COMPARE_SET the server applies when this connection closes without clearOnClose()
// (the process died, or the client was destroyed). When a failure makes the client give up the
// connection it first sends ON_CLOSE_CLEAR (best effort), so a live process is not taken for a
// dead one. connectTcpStore() connects, says HELLO and falls back to a plain connection.
//
// Security (docs/security.md): with options.token set, every HELLO carries it (a server with a
// token serves a connection nothing but HELLO until then); with options.tls enabled the
// connection is TLS, the server's certificate checked against the CA and the host name.
// Riding out a server restart: with reconnectBudget set and kCapRequestId granted in HELLO, a
// lost connection is replaced within that budget (backoff between attempts), HELLO and the
// ON_CLOSE registrations are sent again, changes the server may not have read are sent again
// (each tagged by REQUEST_ID, so none applies twice), a pending WAIT is sent again and the call
// resumes; only when the budget runs out does the loss become the sticky NetworkError.
//
// Thread safety: one request at a time per connection; the object serialises concurrent callers
// with an internal mutex. A NetworkError or ProtocolError is sticky: later calls rethrow it;
// create a new client.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/base/backoff.hpp"
#include "rendezvous/base/endpoint.hpp"
#include "rendezvous/security/tls_options.hpp"
#include "rendezvous/store/connection_hooks.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp {

enum class WireDialect { kV1a, kV2 };

// What a connect loop that keeps failing reports (TcpStoreClientOptions::onConnectProgress).
struct ConnectProgress {
  std::string endpoint;                  // "host:port"
  int attempts = 0;                      // failed attempts so far
  std::chrono::milliseconds elapsed{0};  // since the connect began
  std::chrono::milliseconds budget{0};   // connectTimeout
  std::string lastFailure;               // "10.0.0.1:29400: Connection refused", "resolving 'h': ..."
};

struct TcpStoreClientOptions {
  // The server: a host name or address (IPv4, IPv6 or a name that resolves) and a port (torch's
  // TCPStore default, kDefaultC10dPort).
  Endpoint endpoint{"127.0.0.1", kDefaultC10dPort};
  // Budget for connecting (with exponential backoff and jitter between attempts).
  std::chrono::milliseconds connectTimeout{std::chrono::seconds(30)};
  // Budget for blocking ops without an explicit timeout (get, multiGet, wait(keys)).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Wire dialect to speak.
  WireDialect dialect = WireDialect::kV2;
  // Delays between connect attempts.
  BackoffOptions connectBackoff;
  // Called on the connecting thread after the first failed attempt, then every
  // connectProgressInterval while attempts keep failing (never after success). Must not block.
  // Empty: connect silently.
  std::function<void(const ConnectProgress&)> onConnectProgress;
  std::chrono::milliseconds connectProgressInterval{std::chrono::seconds(5)};
  // Largest value accepted in a reply; a bigger one is a ProtocolError.
  std::size_t maxValueBytes = 256 * 1024 * 1024;
  // Sent as HELLO's "token" field ("" = none). Never logged.
  std::string token;
  // TLS to the server (tls_options.hpp); off unless tls.caFile is set.
  TlsClientOptions tls;
  // When the connection is lost (the server restarted), how long to keep reconnecting, counted
  // from the loss; 0 = never (the loss is a sticky NetworkError). Needs a HELLO that asked for
  // and was granted wire::kCapRequestId (ddprund, StoreServer): changes are then tagged so that
  // those sent again apply once (detail/resumable_connection.hpp).
  std::chrono::milliseconds reconnectBudget{0};
};

// A HELLO field: name, value (free-form, for logs).
using HelloField = std::pair<std::string, std::string>;

// The server's answer to HELLO.
struct ServerHello {
  bool accepted = false;
  uint32_t version = 0;
  uint64_t capabilities = 0;  // wire::kCapOnClose, ...
  std::vector<HelloField> fields;
};

class TcpStoreClient final : public Store, public ConnectionHooks {
 public:
  // Connects before returning, trying every address the host resolves to until one connects
  // (and, in v2, answers the PING), with a Backoff between rounds and progress reports (above).
  // Throws TimeoutError when the connect budget runs out, NetworkError when the host never
  // resolved within it; both one line that counts the attempts by kind of failure. ConfigError
  // when the TLS files cannot be used. Name
  // resolution is the system's getaddrinfo: a hanging DNS server can hold one resolution past
  // the budget (resolv.conf timeouts apply).
  explicit TcpStoreClient(TcpStoreClientOptions options);
  ~TcpStoreClient() override;

  // Store ops: see store.hpp for semantics and blocking. All throw NetworkError (connection lost,
  // sticky), ProtocolError (bad reply, sticky) and TimeoutError (a budget passed; after wait
  // timeouts in v2 the client stays usable, otherwise it becomes unusable as described above).

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  std::string compareSet(const std::string& key, const std::string& expected,
                         const std::string& desired) override;
  using Store::wait;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  bool check(const std::vector<std::string>& keys) override;
  bool deleteKey(const std::string& key) override;
  int64_t numKeys() override;
  std::vector<std::string> multiGet(const std::vector<std::string>& keys) override;
  void multiSet(const std::vector<std::string>& keys,
                const std::vector<std::string>& values) override;
  void append(const std::string& key, const std::string& value) override;
  std::chrono::milliseconds timeout() const override;
  void setTimeout(std::chrono::milliseconds timeout) override;

  // "host:port", for messages.
  std::string endpoint() const;

  // ddprun's HELLO asking for `capabilities`, with `fields` for the server's log. Returns the
  // server's answer (onCloseSupported() follows it), or nullopt when the server closed the
  // connection instead (torch's servers do, on an unknown opcode): this client is then unusable
  // (sticky NetworkError); use a new one without the extension. Blocks up to timeout(). Throws
  // NetworkError, TimeoutError, ProtocolError (v1a: no extension).
  std::optional<ServerHello> hello(uint64_t capabilities, const std::vector<HelloField>& fields);

  // ConnectionHooks (see connection_hooks.hpp). interruptWait() is safe from any thread, also
  // while another thread waits in this client.
  void interruptWait() override;
  bool onCloseSupported() const override;
  bool usable() const override;
  // Connections replaced after a loss so far (see reconnectBudget).
  uint64_t reconnects() const;
  void armOnClose(const std::string& key, const std::string& expected,
                  const std::string& desired) override;
  void clearOnClose(const std::vector<std::string>& keys) override;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Connects as TcpStoreClient(options) does, then says HELLO (asking for `capabilities`, with
// options.token when set). A server that closes the connection on HELLO gets a second, plain
// connection within what is left of connectTimeout. Throws as the constructor and hello() do, and
// ConfigError when the server refuses the HELLO (a wrong or missing token: its reason quoted).
std::unique_ptr<TcpStoreClient> connectTcpStore(const TcpStoreClientOptions& options,
                                                uint64_t capabilities,
                                                const std::vector<HelloField>& fields);

}  // namespace ddp
