// Probing a node for preflight (preflight_probe.hpp, bounded_command.hpp): bounded helper
// commands, the worker-store port check, free disk, the torch probe and the test-only overrides.
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include "launcher/preflight/bounded_command.hpp"
#include "launcher/preflight/preflight_probe.hpp"
#include "rendezvous/base/error.hpp"

using namespace ddp;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// A TCP socket bound to a free loopback port; listening or not (then connecting is refused).
struct LoopbackSocket {
  explicit LoopbackSocket(bool listening) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0);
    socklen_t len = sizeof(a);
    REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
    port = ntohs(a.sin_port);
    if (listening) REQUIRE(::listen(fd, 4) == 0);
  }
  ~LoopbackSocket() { ::close(fd); }
  int fd = -1;
  uint16_t port = 0;
};

EnvLookup envOf(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
  };
}

}  // namespace

TEST_CASE("a bounded command returns its output, and nothing when it fails or runs too long",
          "[unit][preflight]") {
  CHECK(runBounded({"sh", "-c", "echo hello"}, 10s) == std::optional<std::string>("hello\n"));
  CHECK_FALSE(runBounded({"sh", "-c", "echo partial; exit 3"}, 10s));
  CHECK_FALSE(runBounded({"/nonexistent/program"}, 10s));
  // Killed at the bound (without it this test would take 60 s and hit its CTest timeout).
  CHECK_FALSE(runBounded({"sleep", "60"}, 200ms));
  // A child that closes its stdout but keeps running is still bounded.
  CHECK_FALSE(runBounded({"sh", "-c", "exec >&-; sleep 60"}, 200ms));
}

TEST_CASE("the port check connects, or says why it could not", "[unit][preflight]") {
  LoopbackSocket open(true);
  const PortProbe ok = probePort("127.0.0.1", open.port, 2s);
  CHECK(ok.ok);
  CHECK(ok.target == "127.0.0.1:" + std::to_string(open.port));
  CHECK_THAT(ok.detail, Contains(" ms"));
  LoopbackSocket closed(false);
  const PortProbe refused = probePort("127.0.0.1", closed.port, 2s);
  CHECK_FALSE(refused.ok);
  CHECK(refused.detail == "refused");
  const PortProbe unresolvable = probePort("no-such-host.invalid", 1, 2s);
  CHECK_FALSE(unresolvable.ok);
  CHECK_THAT(unresolvable.detail, Contains("cannot resolve"));
  CHECK(probePort("::1", 5, 2s).target == "[::1]:5");
}

TEST_CASE("free disk is read where checkpoints will go, even before the folder exists",
          "[unit][preflight]") {
  const auto tmp = std::filesystem::temp_directory_path();
  const auto free = freeDiskBytes((tmp / "not" / "yet" / "made").string());
  REQUIRE(free);
  CHECK(*free > 0);
  LaunchConfig c;
  c.command = {"train", "--config", "x.json", "--checkpoint-dir", "/ckpt/a"};
  CHECK(checkpointPlace(c) == "/ckpt/a");
  c.command = {"python3", "-u", "t.py", "--checkpoint_dir=/ckpt/b"};
  CHECK(checkpointPlace(c) == "/ckpt/b");
  c.command = {"train"};
  c.logDir = "/logs";
  CHECK(checkpointPlace(c) == "/logs");
  c.logDir.clear();
  CHECK(checkpointPlace(c) == std::filesystem::current_path().string());
}

TEST_CASE("the torch probe reads the interpreter's torch version and is bounded",
          "[unit][preflight]") {
  CHECK(probeTorch("/nonexistent/python", 5s) == "unknown");
  CHECK(probeTorch("false", 5s) == "unknown");
  // Debian's python3-torch, when installed (the project's setup installs it).
  if (std::filesystem::exists("/usr/lib/python3/dist-packages/torch/version.py")) {
    CHECK_THAT(probeTorch("/usr/bin/python3", 10s), Contains("1.13"));
  }
  LaunchConfig c;
  c.entrypointKind = EntrypointKind::kPythonScript;
  c.command = {"/usr/bin/python3", "-u", "t.py"};
  CHECK(pythonOf(c) == "/usr/bin/python3");
  c.entrypointKind = EntrypointKind::kProgram;
  CHECK(pythonOf(c).empty());
}

TEST_CASE("the fingerprint names this binary and kernel; test overrides replace fields",
          "[unit][preflight]") {
  NodeFingerprint fp = probeFingerprint(envOf({{"CUDA_VISIBLE_DEVICES", ""}}));
  CHECK_FALSE(fp.ddprun.empty());
  CHECK(fp.ddprun != "unknown");
  CHECK(fp.kernel != "unknown");
  CHECK(fp.torch == "n/a");
  applyTestFingerprint("torch=9.9,gpus=3,nccl=1.2.3", fp);
  CHECK(fp.torch == "9.9");
  CHECK(fp.gpus == 3);
  CHECK(fp.nccl == "1.2.3");
  CHECK_THROWS_AS(applyTestFingerprint("colour=blue", fp), ConfigError);
  CHECK_THROWS_AS(applyTestFingerprint("torch", fp), ConfigError);
  CHECK_THROWS_AS(applyTestFingerprint("gpus=many", fp), ConfigError);
  CHECK(testClockOffset(envOf({})) == 0ms);
  CHECK(testClockOffset(envOf({{"DDP_TEST_CLOCK_OFFSET_MS", "-5000"}})) == -5000ms);
  CHECK_THROWS_AS(testClockOffset(envOf({{"DDP_TEST_CLOCK_OFFSET_MS", "5s"}})), ConfigError);
}
