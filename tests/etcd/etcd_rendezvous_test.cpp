// The rendezvous algorithm over EtcdStore on a real etcd 3.4 (its own instance): 4 agents (threads,
// one EtcdStore each) form a consistent round; then etcd is SIGKILLed and restarted on the same
// data dir while they are watching, and the job goes on: a worker failure afterwards restarts
// every agent into generation 1 with the same 4 nodes, and nobody is declared lost.
#include <catch2/catch.hpp>

#include <memory>

#include "rendezvous/store/etcd_store.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "tests/etcd/etcd_instance.hpp"
#include "tests/rendezvous/rendezvous_harness.hpp"

using namespace std::chrono_literals;
using ddp::test::Agent;

namespace {

ddp::EtcdStoreOptions storeOptions(const std::string& endpoint) {
  ddp::EtcdStoreOptions o;
  o.endpoints = {ddp::parseEndpoint(endpoint, std::nullopt)};
  o.prefix = "/ddp-rdzv-test/";
  o.timeout = 30s;
  o.retryTimeout = 30s;
  o.requestTimeout = 2s;
  return o;
}

}  // namespace

TEST_CASE("4 agents rendezvous over etcd and survive an etcd SIGKILL + restart", "[etcd][rendezvous]") {
  ddp::test::EtcdInstance etcd;
  ddp::RendezvousSettings settings = ddp::test::fastSettings("etcd-job", 4, 4);
  settings.maxRestarts = 3;
  settings.heartbeatTimeout = 10s;  // longer than the outage below
  std::vector<std::unique_ptr<ddp::EtcdStore>> stores;
  std::vector<std::unique_ptr<Agent>> agents;
  std::vector<Agent*> all;
  for (int i = 0; i < 4; ++i) {
    stores.push_back(std::make_unique<ddp::EtcdStore>(storeOptions(etcd.endpoint())));
    agents.push_back(std::make_unique<Agent>(*stores.back(), settings,
                                             ddp::test::node("host" + std::to_string(i), 2)));
    all.push_back(agents.back().get());
  }

  std::vector<ddp::RendezvousResult> first = ddp::test::joinAll(all);
  ddp::test::checkConsistent(first);
  CHECK(first.front().generation == 0);
  CHECK(first.front().nodeCount == 4);
  CHECK(first.front().worldSize == 8);
  for (Agent* a : all) a->watch();

  etcd.kill9();
  REQUIRE(etcd.start() == 0);

  // A failure reported after the restart reaches every agent through etcd.
  CHECK(all[2]->rdzv->failures().reportFailure(R"({"node":"host2","exitcode":1})").kind ==
        ddp::RendezvousEventKind::kRestartRequested);
  for (Agent* a : {all[0], all[1], all[3]}) {  // the reporter itself gets no event
    std::optional<ddp::RendezvousEvent> event = a->events.waitFor(30s);
    REQUIRE(event.has_value());
    CHECK(event->kind == ddp::RendezvousEventKind::kRestartRequested);
  }
  for (Agent* a : all) a->rdzv->stopWatching();
  std::vector<ddp::RendezvousResult> second = ddp::test::joinAll(all);
  ddp::test::checkConsistent(second);
  CHECK(second.front().generation == 1);
  CHECK(second.front().nodeCount == 4);
  CHECK(second.front().restartsUsed == 1);
  CHECK(all[0]->rdzv->failures().failureRecords().size() == 1);
  for (Agent* a : all) a->rdzv->leave();
}
