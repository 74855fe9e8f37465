// TcpStoreClient: a Store over one TCP connection to ddprund, an embedded StoreServer or a c10d
// TCPStore server.
//
// Speaks the v2 dialect (VALIDATE + PING, CANCEL_WAIT on wait timeouts) by default; the v1a
// dialect (torch 1.13/2.0 servers) is available for talking to old torch servers, where ops the
// dialect lacks are composed from others or throw ProtocolError.
//
// Thread safety: one request at a time per connection; the object serialises concurrent callers
// with an internal mutex. A NetworkError or ProtocolError is sticky: later calls rethrow it;
// create a new client.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "rendezvous/store.hpp"

namespace ddp {

enum class WireDialect { kV1a, kV2 };

struct TcpStoreClientOptions {
  // Server host name or address (IPv4, IPv6 or a name that resolves).
  std::string host = "127.0.0.1";
  // Server port.
  uint16_t port = 29400;
  // Budget for connecting (with exponential backoff and jitter between attempts).
  std::chrono::milliseconds connectTimeout{std::chrono::seconds(30)};
  // Budget for blocking ops without an explicit timeout (get, multiGet, wait(keys)).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Wire dialect to speak.
  WireDialect dialect = WireDialect::kV2;
};

class TcpStoreClient final : public Store {
 public:
  // Connects before returning. Throws TimeoutError listing every failed attempt when the connect
  // budget runs out, ConfigError when the host does not resolve.
  explicit TcpStoreClient(TcpStoreClientOptions options);
  ~TcpStoreClient() override;

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

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ddp
