// StoreServer over real loopback sockets, driven with raw TCPStore bytes (v1 and v2 dialects),
// plus StoreState's waiter bookkeeping checked directly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>

#include "rendezvous/server/detail/store_state.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/raw_socket.hpp"
#include "tests/rendezvous/server/store_server_client.hpp"

using namespace ddp;
using wire::Dialect;
using wire::Op;
using Keys = std::vector<std::string>;
using test::Client;

namespace {

StoreServerOptions loopback(WireLimits limits = {}) {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.port = 0;
  o.limits = limits;
  o.name = "test-store";
  return o;
}

}  // namespace

TEST_CASE("v1 clients: every 1.13 op against the server", "[server]") {
  auto options = loopback();
  options.legacyDialect = wire::LegacyDialect::kTorch113;
  StoreServerThread server(options);
  Client c(server.port(), Dialect::kV1a);
  c.set("/k1", "v1");
  CHECK(c.get("/k1") == "v1");
  CHECK(c.get("/missing").empty());  // improvement over 1.13, which closes the connection
  CHECK(c.add("/cnt", 8) == 8);
  CHECK(c.add("/cnt", -10) == -2);
  CHECK(c.get("/cnt") == "-2");
  CHECK(c.add("/new", 0) == 0);
  CHECK(c.get("/new") == "0");
  c.set("/prefix", " 12abc");
  CHECK(c.add("/prefix", 1) == 13);  // std::stoll semantics
  CHECK(c.cas("/cas", "", "first") == "first");
  CHECK(c.cas("/cas", "wrong", "second") == "first");
  CHECK(c.cas("/cas", "first", "second") == "second");
  CHECK(c.cas("/m", "zz", "v2") == "zz");
  CHECK(c.check({"/m"}) == wire::kNotReady);
  CHECK(c.check({"/k1", "/cas"}) == wire::kReady);
  CHECK(c.check({}) == wire::kReady);
  CHECK(c.numKeys() == 5);
  CHECK(c.del("/k1") == 1);
  CHECK(c.del("/k1") == 0);
  c.send(Op::kWatchKey, "/wk");
  CHECK(c.readByte() == wire::kWatchRegistered);
  c.startWait({"/cas"});
  CHECK(c.readByte() == wire::kStopWaiting);
  c.startWait({});
  CHECK(c.readByte() == wire::kStopWaiting);
  c.expectNothingPending(4);
}

TEST_CASE("auto dialect: a lone v1 opcode 8 becomes DELETE_KEY after the grace", "[server]") {
  StoreServerThread server(loopback());
  Client c(server.port(), Dialect::kV1a);
  c.set("/d", "x");
  CHECK(c.del("/d") == 1);  // paid the grace period once, then pinned v1a
  CHECK(c.del("/d") == 0);
  Client b(server.port(), Dialect::kV1b);
  b.send(Op::kAppend, "/ap", "ab");
  b.send(Op::kAppend, "/ap", "cd");
  CHECK(b.get("/ap") == "abcd");
  CHECK(b.del("/ap") == 1);  // v1b DELETE_KEY is opcode 7
}

TEST_CASE("multi-key WAIT completes only when every key exists", "[server]") {
  StoreServerThread server(loopback());
  Client waiter(server.port(), Dialect::kV1a);
  Client setter(server.port(), Dialect::kV2);
  waiter.startWait({"/a", "/b", "/a"});  // duplicate keys are counted twice
  setter.set("/b", "1");
  setter.sync();
  waiter.expectNothingPending(1);
  setter.set("/a", "2");  // one SET satisfies both /a entries
  CHECK(waiter.readByte() == wire::kStopWaiting);
  waiter.expectNothingPending(2);
}

TEST_CASE("waiters wake on SET, ADD, CAS-create, APPEND and MULTI_SET", "[server]") {
  StoreServerThread server(loopback());
  Client waiter(server.port(), Dialect::kV2);
  Client writer(server.port(), Dialect::kV2);
  waiter.startWait({"/s", "/ad", "/cs", "/ap", "/m1", "/m2"});
  writer.set("/s", "1");
  CHECK(writer.add("/ad", 1) == 1);
  CHECK(writer.cas("/cs", "", "x") == "x");
  writer.send(Op::kAppend, "/ap", "x");
  writer.sync();
  waiter.expectNothingPending(4);
  writer.send(Op::kMultiSet, {}, {}, {}, 0, {"/m1", "1", "/m2", "2"});
  CHECK(waiter.readByte() == wire::kStopWaiting);
  waiter.send(Op::kMultiGet, {}, {}, {}, 0, {"/m2", "/nope", "/ap"});
  CHECK(waiter.readValue() == "2");
  CHECK(waiter.readValue().empty());
  CHECK(waiter.readValue() == "x");
}

TEST_CASE("DELETE_KEY does not wake; CANCEL_WAIT always answers 01", "[server]") {
  StoreServerThread server(loopback());
  Client a(server.port(), Dialect::kV2);
  Client b(server.port(), Dialect::kV2);
  b.set("/gone", "x");
  CHECK(b.del("/gone") == 1);
  a.startWait({"/gone"});
  CHECK(b.del("/gone") == 0);
  a.send(Op::kCancelWait);
  CHECK(a.readByte() == wire::kWaitCanceled);
  b.set("/gone", "back");  // the canceled wait must not answer now
  b.sync();
  a.expectNothingPending(1);
  a.send(Op::kCancelWait);  // nothing pending: still 01
  CHECK(a.readByte() == wire::kWaitCanceled);
}

TEST_CASE("1.13 stale wait: the late 00 reaches the client as upstream", "[server]") {
  StoreServerThread server(loopback());
  Client a(server.port(), Dialect::kV1a);
  Client b(server.port(), Dialect::kV1a);
  b.set("/x", "5");
  a.startWait({"/late"});  // a 1.13 client gives up client-side and says nothing
  b.set("/late", "1");
  b.sync();
  // The captured upstream result: add("x", 1) reads 00 + the first 7 bytes of 6 = 1536.
  CHECK(a.add("/x", 1) == 1536);
}

TEST_CASE("a waiter that disconnects is forgotten", "[server]") {
  StoreServerThread server(loopback());
  auto gone = std::make_unique<Client>(server.port(), Dialect::kV1a);
  gone->startWait({"/never-yet"});
  gone->expectNothingPending(0);  // the WAIT is registered on the server
  gone.reset();
  Client other(server.port(), Dialect::kV1a);
  other.startWait({"/never-yet"});
  Client writer(server.port(), Dialect::kV1a);
  writer.set("/never-yet", "now");
  CHECK(other.readByte() == wire::kStopWaiting);
  CHECK(writer.numKeys() == 1);
}

TEST_CASE("v2: PING, queues, LIST_KEYS and BARRIER", "[server]") {
  StoreServerThread server(loopback());
  Client c(server.port(), Dialect::kV2);
  c.send(Op::kPing);
  CHECK(c.sock.recv(4) == std::string("\x34\x12\x00\x00", 4));
  c.send(Op::kQueuePush, "/q", "one");
  c.send(Op::kQueuePush, "/q", "two");
  c.send(Op::kQueueLen, "/q");
  CHECK(c.readInt() == 2);
  CHECK(c.check({"/q"}) == wire::kReady);
  c.send(Op::kQueuePop, "/q");
  CHECK(c.readInt() == 2);
  CHECK(c.readValue() == "one");
  c.send(Op::kQueuePop, "/q");
  CHECK(c.readInt() == 1);
  CHECK(c.readValue() == "two");
  c.send(Op::kQueuePop, "/q");
  CHECK(c.readInt() == 0);
  CHECK(c.numKeys() == 0);  // queues are not keys

  Client w1(server.port(), Dialect::kV2);
  Client w2(server.port(), Dialect::kV2);
  w1.startWait({"/q"});
  w1.expectNothingPending(0);  // registered first
  w2.startWait({"/q"});
  w2.expectNothingPending(0);
  c.send(Op::kQueuePush, "/q", "x");  // wakes exactly one waiter: the first registered
  CHECK(w1.readByte() == wire::kStopWaiting);
  w2.expectNothingPending(0);

  c.set("/a", "1");
  c.set("/b", "2");
  c.send(Op::kListKeys);
  CHECK(c.readInt() == 2);
  std::vector<std::string> listed{c.readValue(), c.readValue()};
  std::sort(listed.begin(), listed.end());
  CHECK(listed == std::vector<std::string>{"/a", "/b"});

  c.send(Op::kBarrier, "/bar", {}, {}, 2);
  w1.send(Op::kBarrier, "/bar", {}, {}, 2);
  CHECK(c.readByte() == wire::kStopWaiting);
  CHECK(w1.readByte() == wire::kStopWaiting);
  CHECK(c.get("/bar") == "2");
}

TEST_CASE("split and pipelined requests", "[server]") {
  StoreServerThread server(loopback());
  Client c(server.port(), Dialect::kV1a);
  const auto set = c.bytes(Op::kSet, "/split", "value");
  for (char byte : set) c.sock.send(std::string_view(&byte, 1));
  CHECK(c.get("/split") == "value");

  std::string batch;
  constexpr int kCount = 2000;
  for (int i = 0; i < kCount; ++i) {
    batch += c.bytes(Op::kAdd, "/pipe", {}, {}, 1);
    batch += c.bytes(Op::kGet, "/split");
  }
  c.sock.send(batch);
  for (int i = 1; i <= kCount; ++i) {
    REQUIRE(c.readInt() == i);
    REQUIRE(c.readValue() == "value");
  }
}

TEST_CASE("a large value round-trips", "[server]") {
  StoreServerThread server(loopback());
  Client c(server.port(), Dialect::kV1a);
  std::string big(20 * 1024 * 1024, 'z');  // past torch's 8 MiB libuv limit
  big[12345] = 'a';
  c.set("/big", big);
  CHECK(c.get("/big") == big);
}

TEST_CASE("bad input closes only that connection and loses nothing", "[server]") {
  WireLimits limits;
  limits.maxKeyBytes = 16;
  limits.maxValueBytes = 1024;
  limits.maxKeysPerRequest = 4;
  StoreServerThread server(loopback(limits));
  Client good(server.port(), Dialect::kV1a);
  good.set("/kept", "yes");
  CHECK(good.add("/n", 1) == 1);

  auto expectClosed = [&](const std::string& bytes) {
    Client bad(server.port(), Dialect::kV1a);
    bad.sock.send(bytes);
    CHECK(bad.sock.closedByPeer());
  };
  expectClosed(good.bytes(Op::kSet, std::string(17, 'k'), "v"));                 // key too long
  expectClosed(good.bytes(Op::kGet, "/a").substr(0, 1) + std::string(8, '\xff'));  // huge length
  expectClosed(good.bytes(Op::kWait, {}, {}, {}, 0, {"1", "2", "3", "4", "5"}));  // too many keys
  expectClosed(std::string(1, '\x2a'));                                            // unknown op
  {
    Client bad(server.port(), Dialect::kV1a);
    bad.set("/text", "abc");
    bad.send(Op::kAdd, "/text", {}, {}, 1);  // ADD on a non-numeric value
    CHECK(bad.sock.closedByPeer());
  }
  {
    Client bad(server.port(), Dialect::kV1a);  // replies to the good requests come first
    bad.sock.send(bad.bytes(Op::kSet, "/pp", "1") + bad.bytes(Op::kGet, "/pp") + "\x2a");
    CHECK(bad.readValue() == "1");
    CHECK(bad.sock.closedByPeer());
  }
  {
    Client v2(server.port(), Dialect::kV2);
    v2.sock.send(std::string(1, '\x13'));  // opcode 19: past BARRIER
    CHECK(v2.sock.closedByPeer());
  }
  CHECK(good.get("/kept") == "yes");
  CHECK(good.add("/n", 1) == 2);
  CHECK(good.get("/text") == "abc");
  CHECK(good.get("/pp") == "1");
}

TEST_CASE("v1 and v2 clients share one keyspace", "[server]") {
  StoreServerThread server(loopback());
  Client old(server.port(), Dialect::kV1a);
  Client current(server.port(), Dialect::kV2);
  old.set("/shared", "from-1.13");
  CHECK(current.get("/shared") == "from-1.13");
  CHECK(current.add("/count", 2) == 2);
  CHECK(old.add("/count", 3) == 5);
}

TEST_CASE("connections past --max-connections are closed, others keep working", "[server]") {
  auto options = loopback();
  options.maxConnections = 2;
  StoreServerThread server(options);
  Client a(server.port(), Dialect::kV1a);
  Client b(server.port(), Dialect::kV1a);
  a.set("/x", "1");
  CHECK(b.get("/x") == "1");  // both are registered sessions now
  test::RawSocket third(server.port());
  CHECK(third.closedByPeer());
  CHECK(a.get("/x") == "1");
}

TEST_CASE("dual-stack :: accepts IPv4 and IPv6 loopback; a taken port is a clear error",
          "[server]") {
  StoreServerOptions options;
  options.host = "::";
  StoreServerThread server(options);
  Client v4(server.port(), Dialect::kV1a, "127.0.0.1");
  v4.set("/dual", "ok");
  std::optional<Client> v6;
  try {
    v6.emplace(server.port(), Dialect::kV2, "::1");
  } catch (const std::exception& e) {
    WARN("no IPv6 loopback here: " << e.what());
  }
  if (v6) CHECK(v6->get("/dual") == "ok");

  auto taken = loopback();
  taken.port = server.port();
  try {
    StoreServerThread second(taken);
    FAIL("binding a taken port succeeded");
  } catch (const NetworkError& e) {
    CHECK_THAT(e.what(), Catch::Contains("127.0.0.1:" + std::to_string(server.port())));
  }
}

TEST_CASE("StoreServer on a caller's io_context stops cleanly", "[server]") {
  boost::asio::io_context io;
  StoreServer server(io, loopback());
  server.start();
  CHECK(server.address() == "127.0.0.1:" + std::to_string(server.port()));
  std::thread runner([&] { io.run(); });
  {
    Client c(server.port(), Dialect::kV1a);
    c.set("/a", "b");
    CHECK(c.get("/a") == "b");
    c.startWait({"/parked"});
    server.stop();
    CHECK(c.sock.closedByPeer());
  }
  runner.join();  // run() returns: stop() left no work behind
}

namespace {
struct FakeClient : detail::ServerConnection {
  int wakes = 0;
  void onWaitComplete() override { ++wakes; }
};
}  // namespace

TEST_CASE("StoreState drops a disconnected client's registrations", "[server]") {
  detail::MemoryBudget budget(1 << 20);
  detail::StoreState state(budget);
  FakeClient gone, stays;
  detail::OutputQueue out(budget);
  std::string reason;
  std::vector<std::string_view> keys{"/k", "/j"};
  wire::Request wait;
  wait.op = Op::kWait;
  wait.keys = keys;
  REQUIRE(state.apply(wait, gone, out, reason));
  REQUIRE(state.apply(wait, stays, out, reason));
  CHECK(out.empty());
  state.disconnect(gone, true);
  wire::Request set;
  set.op = Op::kSet;
  set.key = "/k";
  REQUIRE(state.apply(set, stays, out, reason));
  set.key = "/j";
  REQUIRE(state.apply(set, stays, out, reason));
  CHECK(gone.wakes == 0);
  CHECK(stays.wakes == 1);
}

TEST_CASE("parseLegacyInt follows std::stoll", "[server]") {
  using detail::parseLegacyInt;
  CHECK(parseLegacyInt("42") == 42);
  CHECK(parseLegacyInt("  -7xyz") == -7);
  CHECK(parseLegacyInt("+3") == 3);
  CHECK(parseLegacyInt("-9223372036854775808") == INT64_MIN);
  CHECK_FALSE(parseLegacyInt("9223372036854775808"));
  CHECK_FALSE(parseLegacyInt("abc"));
  CHECK_FALSE(parseLegacyInt(""));
  CHECK_FALSE(parseLegacyInt("-"));
}
