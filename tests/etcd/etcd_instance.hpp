// EtcdInstance: an etcd of a test's own, started with scripts/ci/start_etcd.sh in
// $DDP_TEST_TMP/etcd on ports $ETCD_CI_CLIENT_PORT / $ETCD_CI_PEER_PORT, and always stopped and
// purged on destruction (also when a check failed). kill9() SIGKILLs it by its pid file; start()
// brings it back on the same data dir.
#pragma once

#include <catch2/catch.hpp>

#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace ddp::test {

using namespace std::chrono_literals;

inline std::string requiredEnv(const char* name) {
  const char* value = std::getenv(name);
  REQUIRE(value != nullptr);
  return value;
}

class EtcdInstance {
 public:
  using Clock = std::chrono::steady_clock;

  EtcdInstance()
      : dir_(requiredEnv("DDP_TEST_TMP") + "/etcd"),
        scripts_(requiredEnv("DDP_SOURCE_DIR") + "/scripts/ci/"),
        endpoint_("127.0.0.1:" + requiredEnv("ETCD_CI_CLIENT_PORT")) {
    REQUIRE(run("stop_etcd.sh --purge") == 0);
    REQUIRE(run("start_etcd.sh") == 0);
  }
  ~EtcdInstance() { run("stop_etcd.sh --purge"); }
  EtcdInstance(const EtcdInstance&) = delete;
  EtcdInstance& operator=(const EtcdInstance&) = delete;

  // Starts etcd again on the same data dir; the script's exit status.
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

}  // namespace ddp::test
