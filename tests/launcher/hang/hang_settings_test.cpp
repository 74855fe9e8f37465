// What hang detection adds to a worker's environment, and only when it is on.
#include "launcher/hang/hang_settings.hpp"
#include "launcher/workers/worker_env_builder.hpp"

#include <catch2/catch.hpp>

namespace ddp {

TEST_CASE("hang detection's worker environment", "[hang]") {
  using namespace std::chrono_literals;
  EnvMap env{{"PATH", "/bin"}};
  SECTION("off: nothing") {
    addHangEnvironment(env, HangSettings{}, "/tmp/fifo");
    CHECK(env == EnvMap{{"PATH", "/bin"}});
  }
  SECTION("--hang-timeout: the progress FIFO and Python's faulthandler") {
    HangSettings s;
    s.timeout = 30s;
    addHangEnvironment(env, s, "/tmp/fifo");
    CHECK(env.at("DDP_PROGRESS_FILE") == "/tmp/fifo");
    CHECK(env.at("PYTHONFAULTHANDLER") == "1");
    CHECK(env.count("TORCHELASTIC_TIMER_FILE") == 0);
  }
  SECTION("the file timer alone: torch's variable, no progress beats") {
    HangSettings s;
    s.fileTimer = true;
    env["PYTHONFAULTHANDLER"] = "/var/log/fault.txt";  // the user's own setting stays
    addHangEnvironment(env, s, "/tmp/fifo");
    CHECK(env.at("TORCHELASTIC_TIMER_FILE") == "/tmp/fifo");
    CHECK(env.count("DDP_PROGRESS_FILE") == 0);
    CHECK(env.at("PYTHONFAULTHANDLER") == "/var/log/fault.txt");
  }
  SECTION("--straggler-threshold alone: the progress FIFO (beats carry compute times)") {
    HangSettings s;
    s.stragglers = std::make_shared<StragglerWatch>(StragglerRule{1.5, 30s});
    CHECK(s.enabled());
    addHangEnvironment(env, s, "/tmp/fifo");
    CHECK(env.at("DDP_PROGRESS_FILE") == "/tmp/fifo");
    CHECK(env.count("TORCHELASTIC_TIMER_FILE") == 0);
  }
}

}  // namespace ddp
