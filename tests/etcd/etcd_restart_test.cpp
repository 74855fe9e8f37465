// EtcdStore survives etcd being SIGKILLed and restarted on the same data dir: calls made while it
// is down block, retry and succeed once it is back, and the data written before the crash is
// still there. Starts its own etcd with scripts/ci/start_etcd.sh (ports from ETCD_CI_*_PORT) and
// always stops and purges it (RAII), also when a check fails.
#include <catch2/catch.hpp>

#include <future>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/etcd_store.hpp"
#include "tests/etcd/etcd_instance.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;


TEST_CASE("a SIGKILLed etcd restarted on the same data dir: clients recover, data persists",
          "[etcd][restart]") {
  ddp::test::EtcdInstance etcd;
  ddp::EtcdStoreOptions o;
  o.endpoints = {ddp::parseEndpoint(etcd.endpoint(), std::nullopt)};
  o.prefix = "/ddp-restart/";
  o.timeout = 60s;
  o.retryTimeout = 60s;
  o.requestTimeout = 2s;
  ddp::EtcdStore store(o);
  store.set("before", "crash");
  CHECK(store.add("generation", 1) == 1);
  int64_t lease = store.putWithLease("heartbeat", "1", 30s);

  // A waiter that is blocked across the whole outage.
  auto waiter = std::async(std::launch::async, [&o] {
    ddp::EtcdStore client(o);
    client.wait({"after"}, 60s);
    return client.get("after");
  });

  etcd.kill9();
  // Calls made while etcd is down block in their retry loop until it is back.
  auto adder = std::async(std::launch::async, [&store] { return store.add("generation", 1); });
  CHECK(adder.wait_for(300ms) == std::future_status::timeout);
  REQUIRE(etcd.start() == 0);

  CHECK(adder.get() == 2);
  CHECK(store.get("before") == "crash");
  CHECK(store.keepAlive(lease) > 0);
  CHECK(store.check({"heartbeat"}));
  store.set("after", "restart");
  REQUIRE(waiter.wait_for(30s) == std::future_status::ready);
  CHECK(waiter.get() == "restart");

  // A fresh client connecting during an outage also waits for etcd to come back.
  etcd.kill9();
  auto late = std::async(std::launch::async, [&o] {
    ddp::EtcdStore client(o);
    return client.get("before");
  });
  CHECK(late.wait_for(300ms) == std::future_status::timeout);
  REQUIRE(etcd.start() == 0);
  CHECK(late.get() == "crash");
}
