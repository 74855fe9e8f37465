// Standby processes' side (worker_runtime/standby.hpp) and the agent's message
// (rendezvous/quorum/standby_message.hpp): what a standby receives is its whole new environment,
// malformed messages are one-line errors.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>

#include "tests/error_of.hpp"
#include "rendezvous/base/error.hpp"
#include "rendezvous/quorum/standby_message.hpp"
#include "worker_runtime/standby.hpp"

using namespace ddp;
using ddp::testing::errorOf;

namespace {

std::string payloadOf(const std::string& message) { return message.substr(kStandbyHeaderBytes); }

// A FIFO in a fresh directory, removed with it.
struct Fifo {
  std::filesystem::path dir, path;
  Fifo() {
    std::string pattern = (std::filesystem::temp_directory_path() / "standby-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir = pattern;
    path = dir / "fifo";
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
  }
  ~Fifo() { std::filesystem::remove_all(dir); }
  void write(const std::string& bytes) const {
    const int fd = ::open(path.c_str(), O_WRONLY);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size()));
    ::close(fd);
  }
};

}  // namespace

TEST_CASE("a standby message round-trips names, values with '=' and empty values") {
  const EnvEntries env = {{"RANK", "3"}, {"OPTS", "a=b=c"}, {"EMPTY", ""}};
  const std::string message = encodeStandbyMessage(env);
  unsigned char header[kStandbyHeaderBytes];
  std::memcpy(header, message.data(), kStandbyHeaderBytes);
  CHECK(standbyMessageLength(header) == message.size() - kStandbyHeaderBytes);
  CHECK(decodeStandbyMessage(payloadOf(message)) == env);
  CHECK(decodeStandbyMessage("").empty());
}

TEST_CASE("a malformed standby message is a ConfigError naming what is wrong") {
  CHECK_THAT(errorOf<ConfigError>([] { decodeStandbyMessage(std::string("RANK=3", 6)); }),
             Catch::Contains("not terminated"));
  CHECK_THAT(errorOf<ConfigError>([] { decodeStandbyMessage(std::string("RANK\0", 5)); }),
             Catch::Contains("without NAME="));
  CHECK_THAT(errorOf<ConfigError>([] { decodeStandbyMessage(std::string("=3\0", 3)); }),
             Catch::Contains("without NAME="));
}

TEST_CASE("a process that is not a standby goes on at once, and says it could be one") {
  ::unsetenv(kStandbyEnv);
  CHECK_FALSE(startedAsStandby());
  CHECK_FALSE(awaitStandbyAssignment());
  CHECK(standbyCapable());
}

TEST_CASE("a standby refuses a message longer than the limit") {
  Fifo fifo;
  ::setenv(kStandbyEnv, fifo.path.c_str(), 1);
  std::string header(kStandbyHeaderBytes, '\0');
  header[3] = 0x7f;  // ~2 GiB
  std::thread agent([&] { fifo.write(header); });
  CHECK_THAT(errorOf<ConfigError>([] { awaitStandbyAssignment(); }),
             Catch::Contains("at most"));
  agent.join();
  ::unsetenv(kStandbyEnv);
}

TEST_CASE("a standby takes the agent's environment as its whole environment") {
  Fifo fifo;
  ::setenv(kStandbyEnv, fifo.path.c_str(), 1);
  ::setenv("DDP_STANDBY_TEST_OLD", "1", 1);
  REQUIRE(startedAsStandby());
  const std::string message = encodeStandbyMessage({{"RANK", "2"}, {"WORLD_SIZE", "4"}});
  std::thread agent([&] { fifo.write(message); });
  CHECK(awaitStandbyAssignment());
  agent.join();
  CHECK(std::string(std::getenv("RANK")) == "2");
  CHECK(std::string(std::getenv("WORLD_SIZE")) == "4");
  CHECK(std::getenv("DDP_STANDBY_TEST_OLD") == nullptr);
  CHECK_FALSE(startedAsStandby());  // the new environment has no DDP_STANDBY
}
