// claimFailureSequence and runWorkerMain: a failing worker takes the next number of its
// generation's failure counter in the worker store once, writes it into its error file, and
// ignores stop signals from then on. One process claims once, so this is one test case in a
// process of its own.
#include <signal.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/store/worker_store_keys.hpp"
#include "worker_runtime/failure_sequence.hpp"
#include "worker_runtime/worker_main.hpp"

namespace fs = std::filesystem;

namespace {

bool ignored(int sig) {
  struct sigaction current {};
  ::sigaction(sig, nullptr, &current);
  return current.sa_handler == SIG_IGN;
}

std::string failureSeqIn(const fs::path& errorFile) {
  std::ifstream in(errorFile);
  return nlohmann::json::parse(in).at("message").at("extraInfo").value("failure_seq", "");
}

}  // namespace

TEST_CASE("a failing worker numbers its failure once, in its error file", "[failure_sequence]") {
  const char* tmp = std::getenv("DDP_TEST_TMP");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / "failure_sequence_test";
  fs::remove_all(dir);
  fs::create_directories(dir);

  // Without the worker env contract nothing is claimed and nothing changes.
  ::unsetenv("MASTER_ADDR");
  CHECK_FALSE(ddp::claimFailureSequence());
  CHECK_FALSE(ignored(SIGTERM));

  ddp::StoreServerOptions options;
  options.host = "127.0.0.1";
  ddp::StoreServerThread server(options);
  ddp::TcpStoreClientOptions clientOptions;
  clientOptions.endpoint.port = server.port();
  ddp::TcpStoreClient store(clientOptions);
  store.add(ddp::failureSequenceKey(3), 1);  // a peer failed first: this worker is #2
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  ::setenv("MASTER_PORT", std::to_string(server.port()).c_str(), 1);
  ::setenv("TORCHELASTIC_RESTART_COUNT", "3", 1);
  const fs::path errorFile = dir / "error.json";
  ::setenv("TORCHELASTIC_ERROR_FILE", errorFile.c_str(), 1);

  CHECK(ddp::runWorkerMain(0, nullptr, [](int, char**) -> int {
          throw ddp::CommError("allreduce failed: Connection reset by peer");
        }) == ddp::kExitCommError);
  CHECK(failureSeqIn(errorFile) == "2");
  CHECK(ddp::claimedFailureSequence() == 2);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) CHECK(ignored(sig));
  // Claimed once: a second failure in this process keeps its number and takes no other.
  CHECK(ddp::runWorkerMain(0, nullptr, [](int, char**) -> int { throw std::runtime_error("x"); }) ==
        ddp::kExitFailure);
  CHECK(failureSeqIn(errorFile) == "2");
  CHECK(store.add(ddp::failureSequenceKey(3), 0) == 2);
}
