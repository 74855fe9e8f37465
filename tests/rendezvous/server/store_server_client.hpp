// Client: a raw-socket TCPStore client for server tests. Requests come from the codec's encoder,
// replies are read raw, so tests see exactly the bytes a torch client would.
//
// Thread safety: none; one test thread per client. Reads throw std::runtime_error on timeout (10 s)
// or when the server closes the connection.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/raw_socket.hpp"

namespace ddp::test {

using Keys = std::vector<std::string>;
using wire::Dialect;
using wire::Op;

// A raw-socket TCPStore client: requests come from the codec's encoder, replies are read raw.
class Client {
 public:
  Client(uint16_t port, Dialect dialect, const std::string& host = "127.0.0.1")
      : sock(port, host), dialect_(dialect) {
    if (dialect_ == Dialect::kV2) send(Op::kValidate);
  }

  void send(Op op, std::string_view key = {}, std::string_view value = {},
            std::string_view desired = {}, int64_t number = 0, const Keys& keys = {}) {
    sock.send(bytes(op, key, value, desired, number, keys));
  }
  std::string bytes(Op op, std::string_view key = {}, std::string_view value = {},
                    std::string_view desired = {}, int64_t number = 0, const Keys& keys = {}) {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    wire::Request r;
    r.op = op;
    r.key = key;
    r.value = value;
    r.desired = desired;
    r.number = number;
    r.nonce = 0x1234;
    r.keys = views;
    std::string out;
    wire::encodeRequest(out, dialect_, r);
    return out;
  }

  int64_t readInt() {
    int64_t v = 0;
    std::memcpy(&v, sock.recv(8).data(), 8);
    return v;
  }
  uint8_t readByte() { return static_cast<uint8_t>(sock.recv(1)[0]); }
  std::string readValue() {
    const auto len = readInt();
    return len == 0 ? std::string() : sock.recv(static_cast<std::size_t>(len));
  }

  // SET has no reply, and the server reads each connection on its own: a SET alone could be
  // applied after another client's later request. set() therefore ends with a round trip, so once
  // it returns every client sees the value. Use send(Op::kSet, ...) for a SET with nothing after.
  void set(std::string_view k, std::string_view v) { send(Op::kSet, k, v), sync(); }
  std::string get(std::string_view k) { return send(Op::kGet, k), readValue(); }
  int64_t add(std::string_view k, int64_t d) { return send(Op::kAdd, k, {}, {}, d), readInt(); }
  std::string cas(std::string_view k, std::string_view e, std::string_view d) {
    return send(Op::kCompareSet, k, e, d), readValue();
  }
  uint8_t check(const Keys& keys) { return send(Op::kCheck, {}, {}, {}, 0, keys), readByte(); }
  void startWait(const Keys& keys) { send(Op::kWait, {}, {}, {}, 0, keys); }
  int64_t numKeys() { return send(Op::kGetNumKeys), readInt(); }
  int64_t del(std::string_view k) { return send(Op::kDeleteKey, k), readInt(); }

  // Proves that nothing (e.g. a stray WAIT reply) is queued ahead on this connection: the server
  // answers in order, so the first byte read must belong to this GETNUMKEYS reply.
  void expectNothingPending(int64_t expectedKeys) { CHECK(numKeys() == expectedKeys); }
  // A round trip: every request this client sent before has been applied.
  void sync() { (void)numKeys(); }

  RawSocket sock;

 private:
  Dialect dialect_;
};

}  // namespace ddp::test
