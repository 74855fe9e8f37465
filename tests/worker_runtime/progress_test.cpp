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
  CHECK_FALSE(got[0].computeSeconds);  // reportProgress(step) alone: no compute time
}

TEST_CASE("compute times go out as the mean per step since the previous beat", "[progress]") {
  // After the FIFO test above (it made the reporter read DDP_PROGRESS_FILE): a server at the same
  // path takes the beats. Steps alternate 1 ms and 5 ms of compute; a beat that carried the last
  // step's time alone would say 1 or 5 ms, the mean of the steps since the previous beat says 3.
  using namespace std::chrono_literals;
  const std::string dir = std::string(std::getenv("DDP_TEST_TMP") ? std::getenv("DDP_TEST_TMP") : "/tmp") +
                          "/progress_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  boost::asio::io_context io;
  FileTimerServer server(io, dir + "/fifo");
  std::vector<FileTimerRequest> got;
  server.setHandler([&](const FileTimerRequest& r) { got.push_back(r); });
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (int64_t step = 100; got.size() < 2 && std::chrono::steady_clock::now() < deadline; step += 2) {
    reportProgress(step, 0.001);  // two steps back to back: a beat covers at least two
    reportProgress(step + 1, 0.005);
    io.run_for(1ms);
  }
  io.run_for(20ms);
  REQUIRE(got.size() >= 2);
  // The first may have gone out at the first call (the limit had passed); the second covers the
  // steps of 100 ms: many on an idle machine (3 ms), at least two on a loaded one (2.3 to 3.7 ms).
  REQUIRE(got[1].computeSeconds);
  CHECK(*got[1].computeSeconds > 0.002);
  CHECK(*got[1].computeSeconds < 0.004);
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
