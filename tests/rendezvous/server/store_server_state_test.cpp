// StoreState, WaitRegistry, MemoryBudget, OutputQueue, InputBuffer and WarningLimiter, checked
// directly (no sockets): the bounds of issue 11 — duplicate keys merged, the memory budget,
// int64 overflow, and rate-limited warnings.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "rendezvous/server/detail/input_buffer.hpp"
#include "rendezvous/server/detail/memory_budget.hpp"
#include "rendezvous/server/detail/output_queue.hpp"
#include "rendezvous/server/detail/store_state.hpp"
#include "rendezvous/server/detail/warning_limiter.hpp"
#include "rendezvous/wire/wire_codec.hpp"

using namespace ddp;
using namespace ddp::detail;
using wire::Op;

namespace {

struct FakeClient : ServerConnection {
  int wakes = 0;
  void onWaitComplete() override { ++wakes; }
};

// A StoreState with its budget and one output queue; requests are built field by field.
struct Fixture {
  explicit Fixture(std::size_t limit = 64 << 20) : budget(limit), state(budget), out(budget) {}

  bool apply(Op op, std::string_view key = {}, std::string_view value = {},
             int64_t number = 0, const std::vector<std::string_view>& keys = {},
             ServerConnection* client = nullptr) {
    wire::Request r;
    r.op = op;
    r.key = key;
    r.value = value;
    r.desired = value;
    r.number = number;
    r.keys = keys;
    reason.clear();
    return state.apply(r, client != nullptr ? *client : self, out, reason);
  }
  // The bytes queued so far (all copied in these tests), then cleared.
  std::string take() {
    std::vector<boost::asio::const_buffer> buffers;
    out.collect(buffers);
    std::string bytes;
    for (const auto& b : buffers) bytes.append(static_cast<const char*>(b.data()), b.size());
    out.clear();
    return bytes;
  }
  std::string get(std::string_view key) {
    REQUIRE(apply(Op::kGet, key));
    const std::string reply = take();
    return reply.substr(8);
  }

  MemoryBudget budget;
  StoreState state;
  OutputQueue out;
  FakeClient self;
  std::string reason;
};

std::string i64(int64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); }

}  // namespace

TEST_CASE("a WAIT listing one key 131072 times costs one registration", "[server][bounds]") {
  Fixture f;
  FakeClient waiter;
  const std::vector<std::string_view> keys(131072, "/0123456789abcde");
  REQUIRE(f.apply(Op::kWait, {}, {}, 0, keys, &waiter));
  CHECK(WaitRegistry::registrationsOf(waiter) == 1);
  REQUIRE(f.apply(Op::kSet, "/0123456789abcde", "v"));
  CHECK(waiter.wakes == 1);  // every listed copy counted down by the one SET, woken once
  CHECK(WaitRegistry::registrationsOf(waiter) == 0);
}

TEST_CASE("merged duplicates keep the legacy counting", "[server][bounds]") {
  Fixture f;
  FakeClient waiter;
  REQUIRE(f.apply(Op::kWait, {}, {}, 0, {"/a", "/b", "/a"}, &waiter));
  CHECK(WaitRegistry::registrationsOf(waiter) == 2);
  REQUIRE(f.apply(Op::kSet, "/b", "1"));
  CHECK(waiter.wakes == 0);
  REQUIRE(f.apply(Op::kSet, "/a", "2"));
  CHECK(waiter.wakes == 1);
  // A stale 1.13 wait stays registered and a later WAIT overwrites the count, as upstream: the
  // stale /x (listed twice) then counts the new wait for /y down past zero without waking it.
  FakeClient stale;
  REQUIRE(f.apply(Op::kWait, {}, {}, 0, {"/x", "/x"}, &stale));
  REQUIRE(f.apply(Op::kWait, {}, {}, 0, {"/y"}, &stale));
  REQUIRE(f.apply(Op::kSet, "/x", "1"));
  CHECK(stale.wakes == 1);  // 1 - 2 crosses zero once: the stray 00 upstream sends too
  REQUIRE(f.apply(Op::kSet, "/y", "1"));
  CHECK(stale.wakes == 1);
}

TEST_CASE("CANCEL_WAIT and disconnect drop registrations in O(1) each", "[server][bounds]") {
  Fixture f;
  std::vector<FakeClient> clients(1000);
  for (auto& c : clients) REQUIRE(f.apply(Op::kWait, {}, {}, 0, {"/bar", "/own"}, &c));
  for (std::size_t i = 0; i < clients.size(); i += 2) f.state.disconnect(clients[i], true);
  REQUIRE(f.apply(Op::kCancelWait, {}, {}, 0, {}, &clients[1]));
  REQUIRE(f.apply(Op::kSet, "/bar", "x"));
  REQUIRE(f.apply(Op::kSet, "/own", "x"));
  int woken = 0;
  for (const auto& c : clients) woken += c.wakes;
  CHECK(woken == 499);  // the odd ones, less the canceled one
}

TEST_CASE("ADD and BARRIER refuse to overflow int64; the value stays", "[server][bounds]") {
  Fixture f;
  REQUIRE(f.apply(Op::kSet, "/n", "9223372036854775807"));
  CHECK_FALSE(f.apply(Op::kAdd, "/n", {}, 1));
  CHECK_THAT(f.reason, Catch::Contains("overflows"));
  CHECK_FALSE(f.state.refusedForMemory());
  CHECK_FALSE(f.apply(Op::kBarrier, "/n", {}, 2));
  CHECK_THAT(f.reason, Catch::Contains("overflows"));
  REQUIRE(f.apply(Op::kSet, "/m", "-9223372036854775808"));
  CHECK_FALSE(f.apply(Op::kAdd, "/m", {}, -1));
  f.take();
  CHECK(f.get("/n") == "9223372036854775807");
  CHECK(f.get("/m") == "-9223372036854775808");
  REQUIRE(f.apply(Op::kAdd, "/n", {}, -7));
  CHECK(f.take() == i64(std::numeric_limits<int64_t>::max() - 7));
}

// torch's server (the libuv backend's barrier(), the only torch server with BARRIER; see
// docs/ddprund.md "BARRIER"): the count goes up by one; below world_size the client is parked on
// the key as a one-key WAIT is, so the next change of the key releases it — an ADD (also ADD 0),
// SET, APPEND, MULTI_SET, a stored COMPARE_SET, or a BARRIER that reaches its own world size —
// and a BARRIER that stays below its world size releases nobody. ddprund does the same.
TEST_CASE("BARRIER waiters are released as torch's server releases them", "[server]") {
  Fixture f;
  FakeClient a, b, c;
  SECTION("a BARRIER below its world size and reads release nobody; an ADD 0 does") {
    REQUIRE(f.apply(Op::kBarrier, "/bar", {}, 3, {}, &a));
    REQUIRE(f.apply(Op::kBarrier, "/bar", {}, 3, {}, &b));
    CHECK(f.take().empty());  // both parked: count 2 of 3
    REQUIRE(f.apply(Op::kCheck, {}, {}, 0, {"/bar"}));
    f.take();
    CHECK(f.get("/bar") == "2");
    REQUIRE(f.apply(Op::kCompareSet, "/bar", "7", 0, {}, &c));  // stores nothing
    f.take();
    CHECK(a.wakes + b.wakes == 0);
    REQUIRE(f.apply(Op::kAdd, "/bar", {}, 0, {}, &c));
    CHECK(f.take() == i64(2));
    CHECK(a.wakes == 1);
    CHECK(b.wakes == 1);
    CHECK(f.get("/bar") == "2");  // the count did not reach 3
  }
  SECTION("a BARRIER that reaches its own world size releases every waiter of the key") {
    REQUIRE(f.apply(Op::kBarrier, "/bar", {}, 3, {}, &a));
    CHECK(f.take().empty());
    REQUIRE(f.apply(Op::kBarrier, "/bar", {}, 2, {}, &b));
    CHECK(f.take() == std::string(1, '\0'));  // b: count 2 >= 2, answered at once
    CHECK(a.wakes == 1);                       // a (world 3) released with it
    REQUIRE(f.apply(Op::kBarrier, "/bar", {}, 3, {}, &c));
    CHECK(f.take() == std::string(1, '\0'));  // count 3 >= 3
  }
  SECTION("a SET releases; a DELETE does not") {
    REQUIRE(f.apply(Op::kBarrier, "/bar", {}, 3, {}, &a));
    REQUIRE(f.apply(Op::kDeleteKey, "/bar"));
    f.take();
    CHECK(a.wakes == 0);
    REQUIRE(f.apply(Op::kSet, "/bar", "5"));
    CHECK(a.wakes == 1);
  }
}

TEST_CASE("the memory budget refuses a request whole and frees what goes", "[server][bounds]") {
  Fixture f(1 << 20);
  const std::size_t idle = f.budget.used();
  const std::string big(300 * 1024, 'v');
  REQUIRE(f.apply(Op::kSet, "/a", big));
  REQUIRE(f.apply(Op::kSet, "/b", big));
  CHECK(f.budget.used() > idle + 2 * big.size());
  CHECK_FALSE(f.apply(Op::kSet, "/c", big + big));  // does not fit: refused, nothing stored
  CHECK(f.state.refusedForMemory());
  CHECK_THAT(f.reason, Catch::Contains("memory budget"));
  CHECK(f.state.numKeys() == 2);
  // MULTI_SET is all or nothing.
  CHECK_FALSE(f.apply(Op::kMultiSet, {}, {}, 0, {"/d", "1", "/e", big, "/f", big}));
  CHECK(f.state.numKeys() == 2);
  REQUIRE(f.apply(Op::kDeleteKey, "/a"));
  REQUIRE(f.apply(Op::kDeleteKey, "/b"));
  f.take();
  CHECK(f.budget.used() <= idle + 1024);  // what is left: the output buffer
  REQUIRE(f.apply(Op::kSet, "/c", big + big));  // fits now
}

TEST_CASE("ON_CLOSE registrations and waits are charged and released", "[server][bounds]") {
  MemoryBudget budget(1 << 20);
  const std::size_t before = budget.used();
  {
    StoreState state(budget);
    FakeClient c;
    OutputQueue out(budget);
    std::string reason;
    const std::string big(600 * 1024, 'x');
    wire::Request arm;
    arm.op = Op::kOnClose;
    arm.key = "k";
    arm.value = big;
    arm.desired = big;
    CHECK_FALSE(state.apply(arm, c, out, reason));  // 1.2 MiB of registration: too much
    arm.desired = "lost";
    REQUIRE(state.apply(arm, c, out, reason));
    CHECK(budget.used() > before + big.size());
    state.disconnect(c, false);
    out.clear();
    CHECK(budget.used() < before + 4096);
  }
  CHECK(budget.used() == before);
}

TEST_CASE("a large value keeps the buffer it arrived in; a GET reply references it",
          "[server][bounds]") {
  Fixture f;
  const std::size_t value = 1 << 20;
  auto buffer = Blob::allocate(f.budget, value + 64);
  REQUIRE(buffer);
  std::memset(buffer->data(), 'z', value + 64);
  buffer->resize(value + 64);
  const std::size_t charged = f.budget.used();
  wire::Request set;
  set.op = Op::kSet;
  set.key = "/big";
  set.value = buffer->view().substr(32, value);
  REQUIRE(f.state.apply(set, f.self, f.out, f.reason, &*buffer));
  CHECK(f.budget.used() < charged + 1024);  // stored without a copy
  buffer.reset();
  REQUIRE(f.apply(Op::kGet, "/big"));
  CHECK(f.out.size() == 8 + value);
  CHECK(f.budget.used() < charged + 1024);  // the reply references the value
  REQUIRE(f.apply(Op::kSet, "/big", "small"));  // the reply keeps the old value alive
  CHECK(f.budget.used() >= charged);
  f.out.clear();
  CHECK(f.budget.used() < charged - value + 1024);
}

TEST_CASE("InputBuffer reserves a declared request and shrinks back when drained",
          "[server][bounds]") {
  MemoryBudget budget(16 << 20);
  InputBuffer input(budget, 1 << 30);
  auto room = input.room(0);
  REQUIRE(room);
  CHECK(room->size() == InputBuffer::kIdleBytes);
  std::memset(room->data(), 'a', 100);
  input.commit(100);
  CHECK_FALSE(input.room(64 << 20));  // a request the budget cannot hold: refused up front
  room = input.room(8 << 20);         // one it can: reserved exactly, before its bytes arrive
  REQUIRE(room);
  CHECK(input.capacity() == std::size_t{8} << 20);
  CHECK(budget.used() < (8 << 20) + 4096);
  input.commit(room->size());
  input.consume(8 << 20);
  room = input.room(0);
  REQUIRE(room);
  CHECK(input.capacity() <= InputBuffer::kIdleBytes);  // drained: back to an idle-sized buffer
  CHECK(budget.used() <= InputBuffer::kIdleBytes + kAllocationOverhead);
}

TEST_CASE("WarningLimiter passes a burst per window and counts the rest", "[server][bounds]") {
  WarningLimiter limiter(3, std::chrono::seconds(10));
  const auto t0 = WarningLimiter::Clock::time_point{} + std::chrono::hours(1);
  int passed = 0;
  for (int i = 0; i < 1000; ++i) passed += limiter.admit(t0 + std::chrono::milliseconds(i)) ? 1 : 0;
  CHECK(passed == 3);
  const auto next = limiter.admit(t0 + std::chrono::seconds(11));
  REQUIRE(next);
  CHECK(*next == " (997 similar warnings suppressed)");
  CHECK(limiter.admit(t0 + std::chrono::seconds(12)) == std::string());
  CHECK(limiter.suppressedTotal() == 997);
  CHECK(limiter.takeSuppressed() == 0);
}
