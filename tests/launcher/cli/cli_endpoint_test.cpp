// Endpoints and empty values on the command line: one parser and one port table for every
// backend, "--flag=" read as an empty value (torchrun's argparse), and Slurm's node id as an order
// rather than a rank for elastic jobs.
#include <catch2/catch.hpp>

#include "rendezvous/base/endpoint.hpp"
#include "tests/launcher/cli_test_util.hpp"

using cli_test::Env;
using cli_test::errorOf;
using cli_test::parse;
using Catch::Contains;
using Endpoints = std::vector<ddp::Endpoint>;
using Strings = std::vector<std::string>;

TEST_CASE("an empty --flag= is an empty value, never the next word", "[cli][empty]") {
  auto id = parse({"--rdzv_id=", "--nproc_per_node=2", "x.py"});
  CHECK(id.nprocPerNode == 2);
  CHECK(id.command == Strings{"python3", "-u", "x.py"});
  CHECK(id.rdzvIdSource == "random (standalone)");
  auto c10d = parse({"--rdzv_id=", "--rdzv_backend=c10d", "x.py"});
  CHECK(c10d.rdzvBackend == ddp::RdzvBackend::kC10d);
  CHECK_FALSE(c10d.standalone);
  CHECK(c10d.rdzvId == "none");
  CHECK(c10d.rdzvEndpoints == Endpoints{{"localhost", 29400}});
  auto endpoint = parse({"--standalone", "--rdzv_endpoint=", "train.py"});
  CHECK(endpoint.command == Strings{"python3", "-u", "train.py"});
  auto role = parse({"--role=", "--nproc-per-node=2", "x"});
  CHECK(role.role.empty());
  CHECK(role.nprocPerNode == 2);
  auto logDir = parse({"--log_dir=", "--tee=3", "x"});
  CHECK(logDir.logDir.empty());
  CHECK(logDir.tee.all == ddp::StdStreams::kBoth);
  CHECK(parse({"--master_addr=", "--nproc_per_node=2", "x"}).standalone);  // one node: unused
  CHECK_THAT(errorOf({"--nnodes=2", "--master_addr=", "x"}), Contains("--master-addr '': expected a hostname"));
  auto conf = parse({"--rdzv_conf=", "--rdzv_backend=c10d", "--rdzv_endpoint=h", "x"});
  CHECK(conf.rdzv.heartbeatTimeout == std::chrono::seconds(15));
  CHECK(parse({"--local_addr=", "--log-prefix=", "x"}).logPrefix == "[{role}{rank}]:");
  CHECK_THAT(errorOf({"--standalone=", "x"}), Contains("--standalone takes no value"));
  CHECK_THAT(errorOf({"--nnodes=", "x"}), Contains("--nnodes ''"));
}

TEST_CASE("an empty endpoint or id counts as not given: PET_* and Slurm still apply", "[cli][empty]") {
  auto pet = parse({"--rdzv-endpoint=", "--rdzv-id=", "--rdzv-backend=c10d", "--nnodes=2", "x"},
                   {{"PET_RDZV_ENDPOINT", "head:7"}, {"PET_RDZV_ID", "kube"}});
  CHECK(pet.rdzvEndpoints == Endpoints{{"head", 7}});
  CHECK(pet.rdzvEndpointSource == "PET_RDZV_ENDPOINT");
  CHECK(pet.rdzvId == "kube");
  auto slurm = parse({"--rdzv-endpoint=", "--rdzv-id=", "train"}, cli_test::slurmStep(1));
  CHECK(slurm.rdzvEndpoints.at(0).host == "n1");
  CHECK(slurm.rdzvId == "42.0");
}

TEST_CASE("static needs HOST:PORT; a port alone is an error, as in torchrun", "[cli][endpoint]") {
  CHECK_THAT(errorOf({"--rdzv-endpoint", "30000", "x"}),
             Contains("--rdzv-endpoint '30000': the port is missing"));
  CHECK_THAT(errorOf({"--nnodes=2", "--rdzv-endpoint=head", "x"}), Contains("the port is missing"));
  CHECK(parse({"--nnodes=2", "--rdzv-endpoint=head:7", "x"}).rdzvEndpoints == Endpoints{{"head", 7}});
  // --master-addr is a host alone, IPv6 with or without brackets.
  CHECK(parse({"--nnodes=2", "--master-addr=::1", "x"}).rdzvEndpoints == Endpoints{{"::1", 29500}});
  CHECK(parse({"--nnodes=2", "--master-addr=[::1]", "--master-port=7", "x"}).rdzvEndpoints ==
        Endpoints{{"::1", 7}});
  CHECK_THAT(errorOf({"--nnodes=2", "--master-addr=a/b", "x"}), Contains("--master-addr 'a/b'"));
}

TEST_CASE("etcd: localhost:2379 without an endpoint, a failover list with one", "[cli][endpoint][etcd]") {
  for (const char* backend : {"--rdzv-backend=etcd", "--rdzv-backend=etcd-v2"}) {
    auto c = parse({backend, "--nnodes=1:3", "--rdzv-id=j", "x"});
    CHECK(c.rdzvEndpoints == Endpoints{{"localhost", 2379}});
  }
  auto list = parse({"--rdzv-backend=etcd", "--rdzv-endpoint=a:1,b,http://c:3,[::1]", "x"});
  CHECK(list.rdzvEndpoints == Endpoints{{"a", 1}, {"b", 2379}, {"c", 3}, {"::1", 2379}});
  CHECK_THAT(errorOf({"--rdzv-backend=etcd", "--rdzv-endpoint=https://h:1", "x"}),
             Contains("https needs --rdzv-conf tls_ca="));
  auto https = parse({"--rdzv-backend=etcd", "--rdzv-endpoint=https://h:1", "--rdzv-conf=tls_ca=/ca.pem", "x"});
  CHECK(https.rdzvEndpoints == Endpoints{{"h", 1}});
  CHECK(https.rdzvConf.protocol == "https");
  CHECK_THAT(errorOf({"--rdzv-backend=etcd", "--rdzv-endpoint=head:port", "x"}), Contains("port must be an integer"));
  CHECK_THAT(errorOf({"--rdzv-backend=etcd", "--rdzv-endpoint=head:70000", "x"}), Contains("--rdzv-endpoint 'head:70000'"));
  CHECK_THAT(errorOf({"--rdzv-backend=c10d", "--rdzv-endpoint=a,b", "x"}), Contains("--rdzv-endpoint 'a,b'"));
}

TEST_CASE("one parser, one table of default ports", "[cli][endpoint]") {
  using ddp::parseEndpoint;
  CHECK(ddp::defaultPortFor(ddp::RdzvBackend::kC10d) == 29400);
  CHECK(ddp::defaultPortFor(ddp::RdzvBackend::kEtcd) == 2379);
  CHECK(ddp::defaultPortFor(ddp::RdzvBackend::kEtcdV2) == 2379);
  CHECK(ddp::defaultPortFor(ddp::RdzvBackend::kStatic) == 29500);
  CHECK(parseEndpoint("h", 29400) == ddp::Endpoint{"h", 29400});
  CHECK(parseEndpoint(" [fe80::1]:5 ", 1) == ddp::Endpoint{"fe80::1", 5});
  CHECK(parseEndpoint("[fe80::1]", 1) == ddp::Endpoint{"fe80::1", 1});
  CHECK(parseEndpoint("h:0", std::nullopt) == ddp::Endpoint{"h", 0});
  CHECK_THROWS_AS(parseEndpoint("h", std::nullopt), ddp::ConfigError);
  CHECK_THROWS_AS(parseEndpoint("", 1), ddp::ConfigError);
  CHECK_THROWS_AS(parseEndpoint("h:+5", 1), ddp::ConfigError);
  CHECK(ddp::formatEndpoint({"fe80::1", 5}) == "[fe80::1]:5");
  CHECK(ddp::formatEndpoint({"h", 5}) == "h:5");
}

TEST_CASE("Slurm: SLURM_NODEID is the rank of a fixed job and only an order in an elastic one", "[cli][slurm]") {
  auto fixed = parse({"train"}, cli_test::slurmStep(2));
  CHECK(fixed.nodeRank == 2);
  CHECK_FALSE(fixed.nodeOrder);
  auto elastic = parse({"--nnodes=3:4", "train"}, cli_test::slurmStep(2));
  CHECK_FALSE(elastic.nodeRank);  // a fixed rank 3 would fail the job once a lower node is lost
  CHECK(elastic.nodeOrder == 2);
  CHECK(elastic.minNodes == 3);
  CHECK(elastic.maxNodes == 4);
  auto pinned = parse({"--nnodes=3:4", "--node-rank=0", "train"}, cli_test::slurmStep(2));
  CHECK(pinned.nodeRank == 0);
  CHECK_FALSE(pinned.nodeOrder);
  Env port = cli_test::slurmStep(0);
  port["DDP_SLURM_PORT"] = "31000";
  auto overridden = parse({"train"}, port);
  CHECK(overridden.rdzvEndpoints == Endpoints{{"n1", 31000}});
  CHECK(overridden.rdzvEndpointSource == "Slurm (DDP_SLURM_PORT)");
  CHECK(overridden.rdzvEndpoint.empty());  // filled typed, not as text parsed again
}
