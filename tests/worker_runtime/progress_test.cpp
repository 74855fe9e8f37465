// worker_runtime's progress beat reaches a ddprun timer FIFO as a progress request of this process
// with its step (the agent's side is launcher/hang/file_timer_server.hpp).
#include "worker_runtime/progress.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "launcher/hang/file_timer_server.hpp"

namespace ddp {

TEST_CASE("reportProgress writes a progress beat the agent's FIFO parses", "[progress]") {
  using namespace std::chrono_literals;
  const std::string dir = std::string(std::getenv("DDP_TEST_TMP") ? std::getenv("DDP_TEST_TMP") : "/tmp") +
                          "/progress_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  boost::asio::io_context io;
  FileTimerServer server(io, dir + "/fifo");
  std::vector<FileTimerRequest> got;
  server.setHandler([&](const FileTimerRequest& r) { got.push_back(r); });
  ::setenv("DDP_PROGRESS_FILE", server.path().c_str(), 1);  // read at the first call
  reportProgress(5);  // the line is in the FIFO when this returns
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (got.empty() && std::chrono::steady_clock::now() < deadline) io.run_for(20ms);
  REQUIRE(got.size() == 1);
  CHECK(got[0].isProgress());
  CHECK(got[0].pid == ::getpid());
  REQUIRE(got[0].step);
  CHECK(*got[0].step == 5);
  CHECK(server.malformed() == 0);
}

TEST_CASE("the last step reported is kept for the error file, under ddprun or not", "[progress]") {
  // After the FIFO test above (declaration order: it must read DDP_PROGRESS_FILE first); kept
  // whether or not a beat goes out (rate limit, no reader).
  reportProgress(12);
  CHECK(lastReportedStep() == 12);
  reportProgress(0);
  CHECK(lastReportedStep() == 0);
}

}  // namespace ddp
