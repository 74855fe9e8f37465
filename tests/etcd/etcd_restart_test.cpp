// EtcdStore survives etcd being SIGKILLed and restarted on the same data dir: calls made while it
// is down block, retry and succeed once it is back, and the data written before the crash is
// still there. Starts its own etcd with scripts/ci/start_etcd.sh (ports from ETCD_CI_*_PORT) and
// always stops and purges it (RAII), also when a check fails.
#include <catch2/catch.hpp>

#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <thread>

#include "rendezvous/error.hpp"
#include "rendezvous/etcd_store.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

std::string env(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE(value != nullptr);
  return value;
}

// One etcd instance of our own, in $DDP_TEST_TMP/etcd; stopped and purged on destruction.
class EtcdInstance {
 public:
  EtcdInstance()
      : dir_(env("DDP_TEST_TMP") + "/etcd"),
        scripts_(env("DDP_SOURCE_DIR") + "/scripts/ci/"),
        endpoint_("127.0.0.1:" + env("ETCD_CI_CLIENT_PORT")) {
    REQUIRE(run("stop_etcd.sh --purge") == 0);
    REQUIRE(run("start_etcd.sh") == 0);
  }
  ~EtcdInstance() { run("stop_etcd.sh --purge"); }

  int start() { return run("start_etcd.sh"); }

  // SIGKILLs etcd (by its pid file) and waits until the pid is gone or a zombie.
  void kill9() {
    std::ifstream file(dir_ + "/etcd.pid");
    pid_t pid = 0;
    REQUIRE(file >> pid);
    REQUIRE(pid > 1);
    REQUIRE(::kill(pid, SIGKILL) == 0);
    const Clock::time_point deadline = Clock::now() + 10s;
    while (alive(pid) && Clock::now() < deadline) std::this_thread::sleep_for(10ms);
    REQUIRE_FALSE(alive(pid));
  }

  const std::string& endpoint() const { return endpoint_; }

 private:
  static bool alive(pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pidText, comm, state;
    if (!(stat >> pidText >> comm >> state)) return false;
    return state != "Z" && state != "X";
  }

  int run(const std::string& script) const {
    std::string cmd = "ETCD_CI_DIR='" + dir_ + "' '" + scripts_ + "'" + script;
    return std::system(cmd.c_str());
  }

  std::string dir_;
  std::string scripts_;
  std::string endpoint_;
};

}  // namespace

TEST_CASE("a SIGKILLed etcd restarted on the same data dir: clients recover, data persists",
          "[etcd][restart]") {
  EtcdInstance etcd;
  ddp::EtcdStoreOptions o;
  o.endpoints = {etcd.endpoint()};
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
