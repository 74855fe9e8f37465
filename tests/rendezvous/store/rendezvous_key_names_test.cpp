// rendezvous_key_names.hpp reads back exactly the names RendezvousKeys builds (the one layout).
#include <catch2/catch.hpp>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/store/rendezvous_key_names.hpp"

using ddp::detail::RendezvousKeys;

TEST_CASE("the incarnation counter names its run, '/' in run ids included", "[unit]") {
  for (const std::string run : {"job7", "a/b", "x", "slurm-123/step"}) {
    const std::string key = RendezvousKeys::incarnationOf(run);
    const auto id = ddp::runIdOfIncarnationKey(key);
    REQUIRE(id);
    CHECK(*id == run);
  }
  const RendezvousKeys keys("job7", 3);
  for (const auto& other : {keys.round(), keys.ended(), keys.history(), keys.metrics(),
                            RendezvousKeys::owner(), std::string("rdzv//inc"),
                            std::string("rdzv/inc"), std::string("other/job/inc")}) {
    INFO(other);
    CHECK_FALSE(ddp::runIdOfIncarnationKey(other));
  }
}

TEST_CASE("heartbeat keys are told apart from every other key of a job", "[unit]") {
  const RendezvousKeys keys("a/r/1/hb/2", 12);  // a run id that looks like a key on its own
  CHECK(ddp::isHeartbeatKey(keys.heartbeat(0, 0)));
  CHECK(ddp::isHeartbeatKey(keys.heartbeat(1234, 77)));
  for (const auto& other :
       {keys.count(3), keys.node(3, 1), keys.result(3), keys.end(3), keys.status(3, 1),
        keys.failCount(3), keys.metrics(), keys.round(), RendezvousKeys::incarnationOf("x"),
        std::string("rdzv/job/0/r//hb/1"), std::string("rdzv/job/0/r/1/hb/"),
        std::string("torch/r/1/hb/2"), std::string("rdzv/job/0/r/x1/hb/2")}) {
    INFO(other);
    CHECK_FALSE(ddp::isHeartbeatKey(other));
  }
}
