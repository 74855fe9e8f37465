// openRendezvousStore() from a parsed command line: it connects to the resolved endpoint, hosts
// the store when told to, and says clearly why it cannot (an occupied Slurm port names
// DDP_SLURM_PORT). Real sockets on loopback, ports from the OS.
#include <catch2/catch.hpp>

#include "launcher/rendezvous/rendezvous_setup.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "tests/launcher/cli_test_util.hpp"

using cli_test::parse;

namespace {

ddp::StoreServerOptions loopback() {
  ddp::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.name = "setup-test store";
  return options;
}

// The message openRendezvousStore() fails with.
std::string failureOf(const ddp::LaunchConfig& config) {
  try {
    ddp::openRendezvousStore(config);
  } catch (const ddp::NetworkError& e) {
    return e.what();
  }
  FAIL("the rendezvous store opened");
  return "";
}

}  // namespace

TEST_CASE("the agent connects to the endpoint the command line resolved", "[rendezvous_setup]") {
  ddp::StoreServerThread server(loopback());
  const std::string port = std::to_string(server.port());
  auto config = parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + port,
                       "--rdzv-id=setup", "--rdzv-conf=is_host=false", "x"});
  auto handle = ddp::openRendezvousStore(config);
  CHECK_FALSE(handle.server);
  CHECK(handle.description == "127.0.0.1:" + port);
  CHECK(handle.endpointPort == server.port());
  handle.store->set("k", "v");
  CHECK(handle.store->get("k") == "v");
  CHECK(handle.store->timeout() == std::chrono::seconds(60));  // read_timeout
}

TEST_CASE("node 0 of a Slurm job that cannot bind its port says which and how to fix it",
          "[rendezvous_setup][slurm]") {
  ddp::StoreServerThread occupant(loopback());  // another job's store on the derived port
  const std::string port = std::to_string(occupant.port());
  cli_test::Env slurm = cli_test::slurmStep(0);
  slurm["DDP_SLURM_PORT"] = port;
  auto config = parse({"--no-python", "/bin/true"}, slurm);
  REQUIRE(config.rdzvConf.isHost == true);
  const std::string message = failureOf(config);
  CHECK_THAT(message, Catch::StartsWith("cannot host the rendezvous store on port " + port +
                                        " (Slurm (DDP_SLURM_PORT)): "));
  CHECK_THAT(message, Catch::Contains("in use") && Catch::Contains("set DDP_SLURM_PORT to a free port"));
  CHECK(message.find('\n') == std::string::npos);
  // Outside Slurm the same failure names the port without the Slurm hint.
  auto forced = parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + port,
                       "--rdzv-id=x", "--rdzv-conf=is_host=true", "x"});
  const std::string plain = failureOf(forced);
  CHECK_THAT(plain, Catch::StartsWith("cannot host the rendezvous store on port " + port + " (--rdzv-endpoint)"));
  CHECK_THAT(plain, !Catch::Contains("DDP_SLURM_PORT"));
}

TEST_CASE("an unreachable store fails within the connect budget, naming where it came from",
          "[rendezvous_setup]") {
  uint16_t closed = 0;
  {
    ddp::StoreServerThread gone(loopback());
    closed = gone.port();
  }
  auto config = parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-id=x", "--rdzv-conf=is_host=false,read_timeout=0.3", "x"},
                      {{"PET_RDZV_ENDPOINT", "127.0.0.1:" + std::to_string(closed)}});
  CHECK(config.rdzvConf.connectTimeout == std::chrono::milliseconds(300));
  const std::string message = failureOf(config);
  CHECK_THAT(message, Catch::StartsWith("cannot reach the rendezvous store at 127.0.0.1:" +
                                        std::to_string(closed) + " (from PET_RDZV_ENDPOINT): timed out after 300 ms"));
}
