// Where the stores an agent hosts listen and whom they serve (store_access.hpp): the worker store
// of a one-node round is loopback-only, a multi-node one serves the round's node addresses only;
// the rendezvous store an agent hosts binds the endpoint's address and serves this host's subnets,
// the Slurm nodes and store_allow, with the token when one is set; a node's probe tells a store
// that serves it from one whose allowlist refuses it.
#include <algorithm>

#include <catch2/catch.hpp>

#include "launcher/rendezvous/admission_probe.hpp"
#include "launcher/rendezvous/store_access.hpp"
#include "rendezvous/base/local_address.hpp"

using namespace ddp;

namespace {

boost::asio::ip::address ip(const std::string& text) { return boost::asio::ip::make_address(text); }

// A round of addrs.size() nodes (their addresses are what Rendezvous::memberAddresses() reads).
RendezvousResult roundOf(const std::vector<std::string>& addrs) {
  RendezvousResult round;
  round.generation = 3;
  round.nodeCount = static_cast<int>(addrs.size());
  return round;
}

}  // namespace

TEST_CASE("a one-node round's worker store is loopback only, this user only") {
  const LaunchConfig config;
  const auto round = roundOf({"10.9.0.1"});
  CHECK(workerStoreAddress(round, "10.9.0.1") == "127.0.0.1");
  const StoreServerOptions options = workerStoreOptions(config, round, "10.9.0.1", {"10.9.0.1"});
  CHECK(options.host == "127.0.0.1");
  CHECK(options.name == "worker store gen 3");
  CHECK(options.otherLocalUsers == StoreServerOptions::OtherLocalUsers::kRefuse);
  CHECK_FALSE(options.trustUnknownLocalOwner);
  CHECK(options.token.empty());
  CHECK(options.allow.contains(ip("127.0.0.1")));
  CHECK_FALSE(options.allow.contains(ip("127.0.0.2")));
  CHECK_FALSE(options.allow.contains(ip("10.9.0.1")));
}

TEST_CASE("a multi-node round's worker store binds the advertised address, serves the members") {
  LaunchConfig config;
  config.rdzvConf.storeAllow = AddressAllowlist::parse("10.1.0.0/16");
  const auto round = roundOf({"10.9.0.1", "10.9.0.2"});
  CHECK(workerStoreAddress(round, "10.9.0.1") == "10.9.0.1");
  const StoreServerOptions options =
      workerStoreOptions(config, round, "10.9.0.1", {"10.9.0.1", "10.9.0.2"});
  CHECK(options.host == "10.9.0.1");
  CHECK(options.allow.contains(ip("10.9.0.1")));
  CHECK(options.allow.contains(ip("10.9.0.2")));
  CHECK(options.allow.contains(ip("::ffff:10.9.0.2")));  // as a dual-stack listener sees it
  CHECK(options.allow.contains(ip("10.1.200.7")));       // store_allow
  CHECK_FALSE(options.allow.contains(ip("10.9.0.3")));   // not a node of the round
  CHECK_FALSE(options.allow.contains(ip("127.0.0.1")));  // not bound there either
}

TEST_CASE("a worker store advertised by host name listens everywhere, serves the resolved nodes") {
  const LaunchConfig config;
  const auto round = roundOf({"localhost", "10.9.0.2"});
  const StoreServerOptions options =
      workerStoreOptions(config, round, "localhost", {"localhost", "10.9.0.2"});
  CHECK(options.host == "::");
  CHECK(options.allow.contains(ip("127.0.0.1")));  // localhost resolved
  CHECK(options.allow.contains(ip("10.9.0.2")));
  CHECK_FALSE(options.allow.contains(ip("10.9.0.3")));
}

TEST_CASE("the rendezvous store an agent hosts binds the endpoint's address") {
  const LaunchConfig config;
  CHECK(hostedRendezvousStoreOptions(config, Endpoint{"127.0.0.1", 29400}, "").host == "127.0.0.1");
  CHECK(hostedRendezvousStoreOptions(config, Endpoint{"localhost", 29400}, "").host == "127.0.0.1");
  CHECK(hostedRendezvousStoreOptions(config, Endpoint{"::1", 29400}, "").host == "::1");
  CHECK(hostedRendezvousStoreOptions(config, Endpoint{"node0.cluster", 29400}, "").host == "::");
  CHECK(hostedRendezvousStoreOptions(config, Endpoint{"10.9.0.1", 29400}, "").port == 29400);
}

namespace {

// The first of the documentation/benchmark networks ("a.b.c.") that no interface of this host is
// on, so that "not served" below does not depend on where the test runs.
std::string foreignNet(const std::vector<std::string>& skip) {
  const AddressAllowlist local = AddressAllowlist::localSubnets();
  for (std::string net : {"203.0.113.", "198.51.100.", "192.0.2.", "198.18.7.", "100.64.9."}) {
    if (std::find(skip.begin(), skip.end(), net) != skip.end()) continue;
    if (!local.contains(ip(net + "10")) && !local.contains(ip(net + "11")) &&
        !local.contains(ip(net + "12")) && !local.contains(ip(net + "77")))
      return net;
  }
  FAIL("every candidate network is one of this host's subnets");
  return "";
}

}  // namespace

TEST_CASE("the rendezvous store an agent hosts serves local subnets, Slurm nodes, store_allow") {
  const std::string slurm = foreignNet({});
  const std::string allowed = foreignNet({slurm});
  const std::string stranger = foreignNet({slurm, allowed});
  LaunchConfig config;
  config.slurmHosts = {slurm + "10", slurm + "11"};
  config.rdzvConf.storeAllow = AddressAllowlist::parse(allowed + "0/24");
  const StoreServerOptions options =
      hostedRendezvousStoreOptions(config, Endpoint{"127.0.0.1", 29400}, "secret");
  CHECK(options.otherLocalUsers == StoreServerOptions::OtherLocalUsers::kRefuse);
  CHECK_FALSE(options.trustUnknownLocalOwner);
  CHECK(options.token == "secret");
  CHECK(options.allow.contains(ip("127.0.0.1")));
  CHECK(options.allow.contains(ip(slurm + "11")));
  CHECK(options.allow.contains(ip(allowed + "77")));
  CHECK_FALSE(options.allow.contains(ip(slurm + "12")));  // not a node of the Slurm step
  CHECK_FALSE(options.allow.contains(ip(stranger + "10")));
}

TEST_CASE("the loopback address is 127.0.0.1 on a host that has it") {
  CHECK(loopbackAddress() == "127.0.0.1");  // ::1 only without it (addresses_netns_test ipv6_only)
  for (const auto& addr : interfaceAddresses(kMaxInterfaceAddrs)) {
    CHECK_FALSE(ip(addr).is_loopback());
  }
}

TEST_CASE("a member's interface addresses are served by the worker store") {
  const LaunchConfig config;
  const auto round = roundOf({"10.31.3.1", "10.31.2.2"});
  const auto options =
      workerStoreOptions(config, round, "10.31.3.1", {"10.31.3.1", "10.31.2.2", "10.31.3.2"});
  CHECK(options.allow.contains(ip("10.31.3.2")));
  CHECK_FALSE(options.allow.contains(ip("10.31.4.2")));
}

TEST_CASE("probeAdmission: served, refused by the allowlist, or unreachable") {
  StoreServerOptions served;
  served.host = "127.0.0.1";
  StoreServerThread open(served);
  const AdmissionProbe ok = probeAdmission("127.0.0.1", open.port(), std::chrono::seconds(10));
  CHECK(ok.outcome == AdmissionOutcome::kServed);
  CHECK(ok.sourceAddr == "127.0.0.1");

  StoreServerOptions narrow = served;
  narrow.allow = AddressAllowlist::parse("127.0.0.2/32");
  StoreServerThread closed(narrow);
  const AdmissionProbe no = probeAdmission("127.0.0.1", closed.port(), std::chrono::seconds(10));
  CHECK(no.outcome == AdmissionOutcome::kRefused);
  CHECK(no.sourceAddr == "127.0.0.1");
  const std::string advice = refusalAdvice(no, "127.0.0.1:" + std::to_string(closed.port()));
  CHECK_THAT(advice, Catch::Contains("refused this node's connection") &&
                         Catch::Contains("connects from (127.0.0.1") &&
                         Catch::Contains("--rdzv-conf store_allow=127.0.0.1"));

  uint16_t gone = 0;
  {
    StoreServerThread stopped(served);
    gone = stopped.port();
  }
  CHECK(probeAdmission("127.0.0.1", gone, std::chrono::seconds(10)).outcome ==
        AdmissionOutcome::kUnreachable);
}
