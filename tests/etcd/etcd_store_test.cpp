// EtcdStore against the real etcd 3.4 of the etcd_server fixture ($DDP_ETCD_ENDPOINT): every Store
// op, wait woken by a put, leases, failover and errors. Each run uses its own key prefix.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/etcd_store.hpp"
#include "tests/rendezvous/dropping_proxy.hpp"
#include "tests/rendezvous/store_contract.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string endpointFromEnv() {
  const char* endpoint = std::getenv("DDP_ETCD_ENDPOINT");
  REQUIRE(endpoint != nullptr);
  return endpoint;
}

std::string uniquePrefix(const std::string& test) {
  std::random_device rd;
  return "/ddp-test/" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + "/" + test + "/";
}

ddp::EtcdStoreOptions options(const std::string& test) {
  ddp::EtcdStoreOptions o;
  o.endpoints = {ddp::parseEndpoint(endpointFromEnv(), std::nullopt)};
  o.prefix = uniquePrefix(test);
  o.timeout = 10s;
  o.retryTimeout = 20s;
  return o;
}

}  // namespace

TEST_CASE("set, get, check, deleteKey and numKeys", "[etcd]") {
  ddp::EtcdStore store(options("basic"));
  CHECK(store.numKeys() == 0);
  CHECK_FALSE(store.check({"a"}));
  store.set("a", "1");
  store.set("b", "");
  CHECK(store.get("a") == "1");
  CHECK(store.get("b").empty());
  CHECK(store.check({"a", "b"}));
  CHECK_FALSE(store.check({"a", "c"}));
  CHECK(store.numKeys() == 2);
  store.set("a", "2");
  CHECK(store.get("a") == "2");
  CHECK(store.deleteKey("a"));
  CHECK_FALSE(store.deleteKey("a"));
  CHECK(store.numKeys() == 1);
  // Keys of another prefix are not counted.
  ddp::EtcdStore other(options("basic-other"));
  other.set("x", "y");
  CHECK(store.numKeys() == 1);
}

TEST_CASE("the shared Store contract holds", "[etcd][contract]") {
  ddp::EtcdStoreOptions o = options("contract");
  ddp::EtcdStore store(o);
  ddp::EtcdStore other(o);
  ddp::test::checkSingleClientOps(store, "ops/");
  ddp::test::checkWaitTimeouts(store, "timeouts/");
  ddp::test::checkWaitWakeups(store, other, "wakeups/");
}

TEST_CASE("values are arbitrary bytes", "[etcd]") {
  ddp::EtcdStore store(options("bytes"));
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  store.set(std::string("k\0\xff", 3), bytes);
  CHECK(store.get(std::string("k\0\xff", 3)) == bytes);
}

TEST_CASE("add counts atomically across clients", "[etcd]") {
  ddp::EtcdStoreOptions o = options("add");
  ddp::EtcdStore store(o);
  CHECK(store.add("n", 5) == 5);
  CHECK(store.add("n", -2) == 3);
  CHECK(store.get("n") == "3");
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&o] {
      ddp::EtcdStore client(o);
      for (int i = 0; i < 25; ++i) client.add("n", 1);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(store.add("n", 0) == 103);
  store.set("text", "abc");
  CHECK_THROWS_AS(store.add("text", 1), ddp::ProtocolError);
}

TEST_CASE("compareSet follows c10d's semantics", "[etcd]") {
  ddp::EtcdStore store(options("cas"));
  // Missing key, non-empty expected: nothing is stored, `expected` comes back.
  CHECK(store.compareSet("k", "x", "y") == "x");
  CHECK_FALSE(store.check({"k"}));
  // Missing key, empty expected: created.
  CHECK(store.compareSet("k", "", "v1") == "v1");
  CHECK(store.get("k") == "v1");
  // Mismatch: the current value comes back, nothing changes.
  CHECK(store.compareSet("k", "nope", "v2") == "v1");
  CHECK(store.get("k") == "v1");
  // Match: swapped.
  CHECK(store.compareSet("k", "v1", "v2") == "v2");
  CHECK(store.get("k") == "v2");
  // An existing empty value matches an empty expected.
  store.set("e", "");
  CHECK(store.compareSet("e", "", "full") == "full");
}

TEST_CASE("multiSet, multiGet and append", "[etcd]") {
  ddp::EtcdStore store(options("multi"));
  store.multiSet({"a", "b", "a"}, {"1", "2", "3"});
  CHECK(store.multiGet({"a", "b"}) == std::vector<std::string>{"3", "2"});
  CHECK_THROWS_AS(store.multiSet({"a"}, {}), std::invalid_argument);
  // More keys than etcd allows in one txn (128) are split into several.
  std::vector<std::string> keys, values;
  for (int i = 0; i < 300; ++i) {
    keys.push_back("many/" + std::to_string(i));
    values.push_back(std::to_string(i * i));
  }
  store.multiSet(keys, values);
  CHECK(store.multiGet(keys) == values);
  CHECK(store.check(keys));
  store.wait(keys, 5s);
  store.append("log", "x");
  store.append("log", "yz");
  CHECK(store.get("log") == "xyz");
}

TEST_CASE("wait wakes on a put and times out naming the key", "[etcd]") {
  ddp::EtcdStoreOptions o = options("wait");
  // The watch, not polling, must wake the waiter: a poll fallback would take 10 s.
  o.pollMin = 10s;
  o.pollMax = 10s;
  ddp::EtcdStore store(o);
  std::atomic<bool> woke{false};
  std::string got;
  std::thread waiter([&] {
    ddp::EtcdStore client(o);
    client.wait({"ready", "go"}, 20s);
    got = client.get("go");
    woke = true;
  });
  store.set("ready", "1");
  CHECK_FALSE(woke.load());  // still missing "go"
  const Clock::time_point put = Clock::now();
  store.set("go", "now");
  waiter.join();
  CHECK(woke.load());
  CHECK(got == "now");
  CHECK(Clock::now() - put < 5s);

  const Clock::time_point start = Clock::now();
  try {
    store.wait({"never"}, 300ms);
    FAIL("wait returned for a key nobody sets");
  } catch (const ddp::TimeoutError& e) {
    CHECK_THAT(e.what(), Catch::Contains(o.prefix + "never") &&
                             Catch::Contains(ddp::formatEndpoint(o.endpoints[0])));
  }
  CHECK(Clock::now() - start >= 300ms);
  store.setTimeout(200ms);
  CHECK_THROWS_AS(store.get("never"), ddp::TimeoutError);
}

TEST_CASE("leased keys vanish when the lease expires unless kept alive", "[etcd]") {
  ddp::EtcdStore store(options("lease"));
  int64_t kept = store.putWithLease("alive", "1", 1s);
  int64_t dropped = store.putWithLease("dying", "1", 1s);
  CHECK(store.check({"alive", "dying"}));
  // Keep one lease alive while the other expires (TTL 1-2 s depending on etcd's election timeout).
  const Clock::time_point deadline = Clock::now() + 15s;
  while (store.check({"dying"}) && Clock::now() < deadline) {
    CHECK(store.keepAlive(kept) > 0);
    std::this_thread::sleep_for(100ms);  // the keep-alive period, not synchronisation
  }
  CHECK_FALSE(store.check({"dying"}));
  CHECK(store.check({"alive"}));
  CHECK(store.keepAlive(dropped) == 0);
  store.revokeLease(kept);
  CHECK_FALSE(store.check({"alive"}));
  store.revokeLease(kept);  // unknown now: ignored
  CHECK_THROWS_AS(store.setWithLease("x", "y", dropped), ddp::ProtocolError);
}

TEST_CASE("bad endpoints: clear errors naming the endpoint; failover to a live one", "[etcd]") {
  ddp::EtcdStoreOptions o = options("endpoints");
  o.endpoints = {{"127.0.0.1", 2379}};
  o.https = true;  // without tls.caFile: nothing to check etcd against
  CHECK_THROWS_WITH(ddp::EtcdStore(o), Catch::Contains("needs a CA file"));
  o.https = false;
  o.endpoints = {{"127.0.0.1", 0}};
  CHECK_THROWS_WITH(ddp::EtcdStore(o), Catch::Contains("'127.0.0.1:0'") && Catch::Contains("1-65535"));
  o.endpoints = {};
  CHECK_THROWS_AS(ddp::EtcdStore(o), ddp::ConfigError);

  // A port nothing listens on: port 1 is privileged and unused on CI machines.
  o.endpoints = {{"127.0.0.1", 1}};
  o.retryTimeout = 300ms;
  const Clock::time_point start = Clock::now();
  CHECK_THROWS_WITH(ddp::EtcdStore(o), Catch::Contains("127.0.0.1:1") && Catch::Contains("attempts"));
  CHECK(Clock::now() - start < 5s);

  o.endpoints = {{"127.0.0.1", 1}, ddp::parseEndpoint(endpointFromEnv(), std::nullopt)};
  o.retryTimeout = 10s;
  ddp::EtcdStore store(o);
  store.set("k", "v");
  CHECK(store.get("k") == "v");
  CHECK(store.endpoint() == endpointFromEnv());
}

// A proxy in front of etcd drops the reply to one txn after etcd applied it: the client retries
// the txn on a new connection, and the request-id marker makes the retry return the first
// attempt's result instead of applying again.
TEST_CASE("an add, append or compareSet whose reply was lost applies once", "[etcd]") {
  const std::string endpoint = endpointFromEnv();
  const auto port = static_cast<uint16_t>(std::stoi(endpoint.substr(endpoint.rfind(':') + 1)));
  ddp::test::DroppingProxy proxy(port);
  auto o = options("request-ids");
  o.endpoints = {{"127.0.0.1", proxy.port()}};
  o.requestTimeout = 5s;
  ddp::EtcdStore store(o);
  CHECK(store.add("n", 1) == 1);

  proxy.armDropNextReply("/v3/kv/txn");
  CHECK(store.add("n", 1) == 2);  // without the marker the retry counts twice: 3
  proxy.armDropNextReply("/v3/kv/txn");
  store.append("log", "a");
  proxy.armDropNextReply("/v3/kv/txn");
  CHECK(store.compareSet("c", "", "x") == "x");
  proxy.armDropNextReply("/v3/kv/txn");
  CHECK(store.add("n", 5) == 7);
  CHECK(proxy.connections() >= 5);  // every drop cost a connection

  ddp::EtcdStoreOptions same = o;
  same.endpoints = {ddp::parseEndpoint(endpoint, std::nullopt)};
  ddp::EtcdStore reader(same);
  CHECK(reader.get("n") == "7");
  CHECK(reader.get("log") == "a");
  CHECK(reader.get("c") == "x");
  CHECK(reader.numKeys() == 3);  // the marker lives outside the job's prefix
}
