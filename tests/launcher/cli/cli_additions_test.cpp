// ddprun's own failure-handling flags, beyond torchrun's: --hang-timeout, --straggler-threshold
// and --straggler-window, --exclude-*, --verdict-after, --preflight — their defaults, DDP_
// variables and one-line errors. torchrun's flags and the rest of the command line: cli_test.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "launcher/cli/cli.hpp"
#include "tests/launcher/cli_test_util.hpp"

using namespace cli_test;
using Strings = std::vector<std::string>;

TEST_CASE("--hang-timeout: off by default, seconds or ms, at least 1 s; torch's file timer env",
          "[cli][hang]") {
  using namespace std::chrono_literals;
  const auto plain = parse({"x"});
  CHECK(plain.hangTimeout == 0ms);
  CHECK_FALSE(plain.fileTimer);
  CHECK(plain.timerFile.empty());
  CHECK(parse({"--hang-timeout=30", "x"}).hangTimeout == 30s);
  CHECK(parse({"--hang_timeout", "1500ms", "x"}).hangTimeout == 1500ms);
  CHECK(parse({"--hang-timeout=0", "x"}).hangTimeout == 0ms);
  CHECK(parse({"x"}, {{"DDP_HANG_TIMEOUT", "2.5"}}).hangTimeout == 2500ms);
  CHECK(parse({"--hang-timeout=4", "x"}, {{"DDP_HANG_TIMEOUT", "2.5"}}).hangTimeout == 4s);
  CHECK_THAT(errorOf({"--hang-timeout=0.5", "x"}), Catch::Contains("0 (off) or at least 1 s"));
  CHECK_THAT(errorOf({"--hang-timeout=soon", "x"}), Catch::Contains("--hang-timeout 'soon'"));
  // As torchrun: exactly "1" enables the file timer; the path is taken as given.
  const auto timer = parse({"x"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"},
                                   {"TORCHELASTIC_TIMER_FILE", "/tmp/wd"}});
  CHECK(timer.fileTimer);
  CHECK(timer.timerFile == "/tmp/wd");
  CHECK_FALSE(parse({"x"}, {{"TORCHELASTIC_ENABLE_FILE_TIMER", "true"}}).fileTimer);
}

TEST_CASE("--straggler-threshold: off by default, a factor over 1; --straggler-window: 30 s, >= 1 s",
          "[cli][straggler]") {
  using namespace std::chrono_literals;
  const auto plain = parse({"x"});
  CHECK(plain.stragglerThreshold == 0);
  CHECK(plain.stragglerWindow == 30s);
  CHECK(parse({"--straggler-threshold=1.5", "x"}).stragglerThreshold == 1.5);
  CHECK(parse({"--straggler_threshold", "3", "x"}).stragglerThreshold == 3);
  CHECK(parse({"--straggler-threshold=0", "x"}).stragglerThreshold == 0);
  CHECK(parse({"x"}, {{"DDP_STRAGGLER_THRESHOLD", "2"}}).stragglerThreshold == 2);
  CHECK(parse({"--straggler-window=10", "x"}).stragglerWindow == 10s);
  CHECK(parse({"--straggler-window", "1500ms", "x"}).stragglerWindow == 1500ms);
  CHECK(parse({"x"}, {{"DDP_STRAGGLER_WINDOW", "5"}}).stragglerWindow == 5s);
  CHECK_THAT(errorOf({"--straggler-threshold=1", "x"}),
             Catch::Contains("--straggler-threshold '1': must be 0 (off) or a factor more than 1"));
  CHECK_THAT(errorOf({"--straggler-threshold=0.5", "x"}), Catch::Contains("more than 1"));
  CHECK_THAT(errorOf({"--straggler-threshold=-2", "x"}), Catch::Contains("more than 1"));
  CHECK_THAT(errorOf({"--straggler-threshold=fast", "x"}), Catch::Contains("'fast'"));
  CHECK_THAT(errorOf({"--straggler-threshold=1.5x", "x"}), Catch::Contains("'1.5x'"));
  CHECK_THAT(errorOf({"--straggler-threshold=nan", "x"}), Catch::Contains("more than 1"));
  CHECK_THAT(errorOf({"--straggler-window=0.5", "x"}), Catch::Contains("at least 1 s"));
  CHECK_THAT(errorOf({"--straggler-window=soon", "x"}), Catch::Contains("--straggler-window 'soon'"));
}

TEST_CASE("--exclude-after/-window/-cooldown: defaults, DDP_ variables, bad values one line",
          "[cli][exclusion]") {
  const ddp::LaunchConfig d = parse({"x"});
  CHECK(d.excludeAfter == 0);  // opt-in: torchrun excludes no node (issue 30 item 3)
  CHECK(d.excludeWindow == std::chrono::minutes(10));
  CHECK(d.excludeCooldown == std::chrono::minutes(10));
  const ddp::LaunchConfig c =
      parse({"--exclude-after=3", "--exclude-window", "90", "--exclude-cooldown=2.5", "x"});
  CHECK(c.excludeAfter == 3);
  CHECK(c.excludeWindow == std::chrono::seconds(90));
  CHECK(c.excludeCooldown == std::chrono::milliseconds(2500));
  const ddp::LaunchConfig e = parse({"x"}, {{"DDP_EXCLUDE_AFTER", "5"}, {"DDP_EXCLUDE_COOLDOWN", "60"}});
  CHECK(e.excludeAfter == 5);
  CHECK(e.excludeCooldown == std::chrono::seconds(60));
  CHECK(errorOf({"--exclude-after=-2", "x"}) ==
        "--exclude-after '-2': must be between 0 and 2147483647");
  CHECK(errorOf({"--exclude-cooldown=0", "x"}) ==
        "--exclude-cooldown '0': must be a positive duration");
  CHECK_THAT(errorOf({"--exclude-window=soon", "x"}), Catch::Contains("--exclude-window 'soon'"));
}

TEST_CASE("--exclude-stragglers: off by default, DDP_EXCLUDE_STRAGGLERS, needs straggler detection",
          "[cli][exclusion]") {
  CHECK_FALSE(parse({"--straggler-threshold=2", "x"}).excludeStragglers);
  CHECK(parse({"--straggler-threshold=2", "--exclude-stragglers", "x"}).excludeStragglers);
  CHECK(parse({"--straggler-threshold=2", "x"}, {{"DDP_EXCLUDE_STRAGGLERS", "1"}}).excludeStragglers);
  CHECK(errorOf({"--exclude-stragglers", "x"}) ==
        "--exclude-stragglers needs straggler detection: give --straggler-threshold too (e.g. 1.5)");
}

TEST_CASE("--verdict-after: 0 (off) by default, DDP_VERDICT_AFTER, bad values one line",
          "[cli][verdict]") {
  CHECK(parse({"x"}).verdictAfter == 0);  // opt-in: --max-restarts is honoured exactly
  CHECK(parse({"--verdict-after=3", "x"}).verdictAfter == 3);
  CHECK(parse({"--verdict-after=0", "x"}, {{"DDP_VERDICT_AFTER", "3"}}).verdictAfter == 0);
  CHECK(parse({"--verdict_after", "5", "x"}).verdictAfter == 5);
  CHECK(parse({"x"}, {{"DDP_VERDICT_AFTER", "2"}}).verdictAfter == 2);
  CHECK(parse({"--verdict-after=4", "x"}, {{"DDP_VERDICT_AFTER", "2"}}).verdictAfter == 4);
  CHECK(errorOf({"--verdict-after=-1", "x"}) ==
        "--verdict-after '-1': must be between 0 and 2147483647");  // one line
  CHECK_THAT(errorOf({"--verdict-after=often", "x"}),
             Catch::Contains("--verdict-after 'often': not an integer"));
  CHECK_THAT(errorOf({"x"}, {{"DDP_VERDICT_AFTER", "x"}}), Catch::Contains("'x': not an integer"));
}

TEST_CASE("--preflight: warn by default, DDP_PREFLIGHT, bad values named", "[cli][preflight]") {
  CHECK(parse({"x"}).preflight == ddp::PreflightMode::kWarn);
  CHECK(parse({"--preflight=strict", "x"}).preflight == ddp::PreflightMode::kStrict);
  CHECK(parse({"--preflight", "off", "x"}).preflight == ddp::PreflightMode::kOff);
  CHECK(parse({"x"}, {{"DDP_PREFLIGHT", "strict"}}).preflight == ddp::PreflightMode::kStrict);
  CHECK(parse({"--preflight=warn", "x"}, {{"DDP_PREFLIGHT", "off"}}).preflight ==
        ddp::PreflightMode::kWarn);
  CHECK_THAT(errorOf({"--preflight=loud", "x"}),
             Catch::Contains("--preflight 'loud'") && Catch::Contains("warn, strict, off"));
  CHECK_THAT(errorOf({"x"}, {{"DDP_PREFLIGHT", "on"}}), Catch::Contains("DDP_PREFLIGHT 'on'"));
}
