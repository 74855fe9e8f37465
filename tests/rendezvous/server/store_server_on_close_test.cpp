// ddprun's wire extension on StoreServer: HELLO, ON_CLOSE and ON_CLOSE_CLEAR over real loopback
// sockets driven with raw bytes, and StoreState's rule that a stopping server applies nothing.
//
// "Nothing happened" is observed without sleeping: the closing connection also holds a sentinel
// registration, and the server applies all of a connection's registrations in one step, so once a
// waiter sees the sentinel the fate of the other keys is decided.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "rendezvous/server/detail/store_state.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/raw_socket.hpp"
#include "tests/rendezvous/wire_test_support.hpp"

using namespace ddp;
using wire::Op;
using wire::testing::hex;
using Keys = std::vector<std::string>;

namespace {

// A v2 raw client.
class Conn {
 public:
  explicit Conn(uint16_t port) : sock(port) { sock.send(hex("00 cef7853c")); }

  void send(Op op, std::string_view key = {}, std::string_view value = {},
            std::string_view desired = {}, const Keys& keys = {}) {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    wire::Request r;
    r.op = op;
    r.key = key;
    r.value = value;
    r.desired = desired;
    r.keys = views;
    std::string out;
    wire::encodeRequest(out, wire::Dialect::kV2, r);
    sock.send(out);
  }
  int64_t readInt() {
    int64_t v = 0;
    std::memcpy(&v, sock.recv(8).data(), 8);
    return v;
  }
  std::string readValue() {
    const auto len = readInt();
    return len == 0 ? std::string() : sock.recv(static_cast<std::size_t>(len));
  }

  int64_t arm(std::string_view key, std::string_view expected, std::string_view desired) {
    send(Op::kOnClose, key, expected, desired);
    return readInt();
  }
  int64_t clear(const Keys& keys) {
    send(Op::kOnCloseClear, {}, {}, {}, keys);
    return readInt();
  }
  // SET has no reply; the CHECK after it is a round trip, so other connections see the value once
  // set() returns (the server reads each connection on its own).
  void set(std::string_view k, std::string_view v) { send(Op::kSet, k, v), (void)exists(k); }
  std::string get(std::string_view k) { return send(Op::kGet, k), readValue(); }
  bool exists(std::string_view k) {
    send(Op::kCheck, {}, {}, {}, {std::string(k)});
    return sock.recv(1)[0] == wire::kReady;
  }
  // Blocks until every key exists (the server answers WAIT with 00).
  void waitFor(const Keys& keys) {
    send(Op::kWait, {}, {}, {}, keys);
    REQUIRE(sock.recv(1, std::chrono::seconds(20))[0] == wire::kStopWaiting);
  }

  test::RawSocket sock;
};

StoreServerOptions loopback() {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.name = "on-close-store";
  return o;
}

}  // namespace

TEST_CASE("HELLO is answered with version 1 and the ON_CLOSE and REQUEST_ID capabilities",
          "[server][extension]") {
  StoreServerThread server(loopback());
  Conn c(server.port());
  c.sock.send(hex("f0 01000000 0100000000000000 0100000000000000 "
                  "0600000000000000 636c69656e74 0600000000000000 64647072756e"));
  // Capabilities 3 (no kCapDurable without a data directory); fields server and instance.
  const auto reply = hex("00 01000000 0300000000000000 0200000000000000 "
                         "0600000000000000 736572766572 0c00000000000000") +
                     "ddprun store" + hex("0800000000000000") + "instance" +
                     hex("1000000000000000");
  CHECK(c.sock.recv(reply.size()) == reply);
  const std::string instance = c.sock.recv(16);  // a random id per server, in hex
  CHECK(instance.find_first_not_of("0123456789abcdef") == std::string::npos);
  c.set("k", "v");  // the connection keeps working
  CHECK(c.get("k") == "v");
}

TEST_CASE("a connection that closes applies its ON_CLOSE and wakes waiters",
          "[server][extension]") {
  StoreServerThread server(loopback());
  Conn watcher(server.port());
  watcher.set("round", "3");
  {
    Conn dying(server.port());
    CHECK(dying.arm("end", "", "peerlost|node 1 died") == 1);
    CHECK(dying.arm("round", "3", "4") == 2);
    watcher.send(Op::kWait, {}, {}, {}, {"end"});
  }  // closed here, as when the process dies
  REQUIRE(watcher.sock.recv(1, std::chrono::seconds(20))[0] == wire::kStopWaiting);
  CHECK(watcher.get("end") == "peerlost|node 1 died");
  CHECK(watcher.get("round") == "4");
}

TEST_CASE("cleared registrations are not applied", "[server][extension]") {
  StoreServerThread server(loopback());
  Conn watcher(server.port());
  SECTION("by key") {
    {
      Conn c(server.port());
      CHECK(c.arm("gone", "", "x") == 1);
      CHECK(c.arm("sentinel", "", "s") == 2);
      CHECK(c.clear({"gone", "never-armed"}) == 1);
    }
    watcher.waitFor({"sentinel"});
    CHECK_FALSE(watcher.exists("gone"));
  }
  SECTION("all at once (an empty key list)") {
    {
      Conn c(server.port());
      CHECK(c.arm("a", "", "x") == 1);
      CHECK(c.arm("b", "", "x") == 2);
      CHECK(c.clear({}) == 2);
      CHECK(c.arm("sentinel", "", "s") == 1);
    }
    watcher.waitFor({"sentinel"});
    CHECK_FALSE(watcher.exists("a"));
    CHECK_FALSE(watcher.exists("b"));
  }
}

TEST_CASE("ON_CLOSE replaces by key, refuses past the limit, is a compare-set",
          "[server][extension]") {
  StoreServerThread server(loopback());
  Conn watcher(server.port());
  watcher.set("taken", "other");
  {
    Conn c(server.port());
    CHECK(c.arm("k", "", "first") == 1);
    CHECK(c.arm("k", "", "second") == 1);  // replaced, not added
    CHECK(c.arm("taken", "", "lost") == 2);
    for (std::size_t i = 2; i < detail::kMaxOnClosePerClient; ++i) {
      CHECK(c.arm("n" + std::to_string(i), "", "x") == static_cast<int64_t>(i + 1));
    }
    CHECK(c.arm("one-too-many", "", "x") == wire::kOnCloseRefused);
    CHECK(c.arm("k", "", "third") == static_cast<int64_t>(detail::kMaxOnClosePerClient));
  }
  watcher.waitFor({"k", "n2"});
  CHECK(watcher.get("k") == "third");
  CHECK(watcher.get("taken") == "other");  // expected "" did not match
  CHECK_FALSE(watcher.exists("one-too-many"));
}

TEST_CASE("a v1 (torch) connection cannot use the extension", "[server][extension]") {
  StoreServerThread server(loopback());
  test::RawSocket v1(server.port());
  v1.send(hex("f1 0100000000000000 6b 0000000000000000 0100000000000000 76"));
  CHECK(v1.closedByPeer());
  Conn watcher(server.port());
  CHECK_FALSE(watcher.exists("k"));
}

namespace {
struct Client : detail::ServerConnection {
  void onWaitComplete() override {}
};
}  // namespace

TEST_CASE("StoreState applies ON_CLOSE only when told to (not when the server stops)",
          "[server][extension]") {
  detail::MemoryBudget budget(1 << 20);
  detail::StoreState state(budget);
  Client stopped, died;
  detail::OutputQueue out(budget);
  std::string reason;
  wire::Request arm;
  arm.op = Op::kOnClose;
  arm.key = "end";
  arm.desired = "lost";
  REQUIRE(state.apply(arm, stopped, out, reason));
  REQUIRE(state.apply(arm, died, out, reason));
  CHECK(state.disconnect(stopped, false).empty());
  CHECK(state.numKeys() == 0);
  const auto applied = state.disconnect(died, true);
  REQUIRE(applied.size() == 1);
  CHECK(applied[0].swapped);
  CHECK(applied[0].action.key == "end");
  CHECK(state.numKeys() == 1);
  CHECK(state.disconnect(died, true).empty());  // applied once
}
