// The file-timer line codec: torch's FileTimerRequest.to_json() lines (acquire, release), ddprun's
// progress beat, and every malformed line rejected with a reason.
#include "launcher/hang/file_timer_request.hpp"

#include <catch2/catch.hpp>

namespace ddp {
namespace {

FileTimerRequest parsed(const std::string& line) {
  auto r = parseTimerLine(line);
  REQUIRE(std::holds_alternative<FileTimerRequest>(r));
  return std::get<FileTimerRequest>(r);
}

std::string rejected(const std::string& line) {
  auto r = parseTimerLine(line);
  REQUIRE(std::holds_alternative<MalformedTimerLine>(r));
  return std::get<MalformedTimerLine>(r).why;
}

}  // namespace

TEST_CASE("torch's acquire and release lines parse", "[file_timer]") {
  // As torch 1.13's json.dumps writes them (separators ", " and ": ").
  auto acquire = parsed(R"({"version": 1, "pid": 4242, "scope_id": "train.py#57", )"
                        R"("expiration_time": 1700000012.25, "signal": 9})");
  CHECK(acquire.pid == 4242);
  CHECK(acquire.scopeId == "train.py#57");
  CHECK(acquire.expirationTime == 1700000012.25);
  CHECK(acquire.signal == 9);
  CHECK_FALSE(acquire.isRelease());
  CHECK_FALSE(acquire.isProgress());
  CHECK_FALSE(acquire.step);

  auto release = parsed(R"({"version": 1, "pid": 4242, "scope_id": "train.py#57", )"
                        R"("expiration_time": -1, "signal": 0})");
  CHECK(release.isRelease());
  CHECK(release.signal == 0);
}

TEST_CASE("unknown members are ignored, as torch's server ignores them", "[file_timer]") {
  auto r = parsed(R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": 5, )"
                  R"("signal": 15, "extra": [1, 2]})");
  CHECK(r.pid == 7);
  CHECK(r.signal == 15);
}

TEST_CASE("a progress beat is the release of ddprun.progress with a step", "[file_timer]") {
  FileTimerRequest beat;
  beat.pid = 99;
  beat.scopeId = kProgressScope;
  beat.step = 41;
  const std::string line = formatTimerLine(beat);
  CHECK(line.back() == '\n');
  auto back = parsed(line.substr(0, line.size() - 1));
  CHECK(back.isProgress());
  CHECK(back.isRelease());  // what torch's own watchdog makes of it: a no-op release
  REQUIRE(back.step);
  CHECK(*back.step == 41);
  CHECK(back.pid == 99);
  CHECK_FALSE(back.computeSeconds);
}

TEST_CASE("a progress beat may carry the compute seconds per step", "[file_timer]") {
  FileTimerRequest beat;
  beat.pid = 99;
  beat.scopeId = kProgressScope;
  beat.step = 41;
  beat.computeSeconds = 0.0123;
  const std::string line = formatTimerLine(beat);
  auto back = parsed(line.substr(0, line.size() - 1));
  REQUIRE(back.computeSeconds);
  CHECK(*back.computeSeconds == Approx(0.0123));
  // As worker_runtime writes it (progress.cpp).
  auto written = parsed(R"({"version": 1, "pid": 5, "scope_id": "ddprun.progress", )"
                        R"("expiration_time": -1, "signal": 0, "step": 7, "compute_s": 0.001})");
  REQUIRE(written.computeSeconds);
  CHECK(*written.computeSeconds == Approx(0.001));
  CHECK(rejected(R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": -1, )"
                 R"("signal": 0, "step": 1, "compute_s": -1})")
            .find("compute_s") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": -1, )"
                 R"("signal": 0, "step": 1, "compute_s": "1"})")
            .find("compute_s") != std::string::npos);
}

TEST_CASE("malformed lines are rejected with the reason", "[file_timer]") {
  CHECK(rejected("") == "not JSON");
  CHECK(rejected("{\"version\": 1, \"pid\": ") == "not JSON");
  CHECK(rejected("[1, 2]") == "not a JSON object");
  CHECK(rejected(R"({"version": 2, "pid": 1, "scope_id": "s", "expiration_time": 1, "signal": 9})")
            .find("version") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": 0, "scope_id": "s", "expiration_time": 1, "signal": 9})")
            .find("not a process id") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": "7", "scope_id": "s", "expiration_time": 1, "signal": 9})")
            .find("pid") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": 7, "scope_id": 3, "expiration_time": 1, "signal": 9})")
            .find("scope_id") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": 7, "scope_id": "s", "signal": 9})")
            .find("expiration_time") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": 1})")
            .find("signal") != std::string::npos);
  CHECK(rejected(R"({"version": 1, "pid": 7, "scope_id": "s", "expiration_time": -1, )"
                 R"("signal": 0, "step": "x"})")
            .find("step") != std::string::npos);
  CHECK(rejected(std::string(kMaxTimerLine, 'x')).find("longer than") != std::string::npos);
}

}  // namespace ddp
