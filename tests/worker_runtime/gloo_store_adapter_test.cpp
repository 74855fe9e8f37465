// GlooStoreAdapter (Gloo's rendezvous over our Store seam) and localAddressTowards.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/in_memory_store.hpp"
#include "worker_runtime/detail/gloo_store_adapter.hpp"
#include "rendezvous/base/local_address.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("the adapter stores raw bytes under its prefix", "[gloo_store_adapter]") {
  ddp::InMemoryStore store(60s);
  ddp::detail::GlooStoreAdapter adapter(store, "comm/gloo", 5s);
  const std::vector<char> bytes{'\0', 'a', '\xff', '\n'};
  adapter.set("0", bytes);
  CHECK(store.get("comm/gloo/0") == std::string(bytes.begin(), bytes.end()));
  CHECK(adapter.get("0") == bytes);
}

TEST_CASE("get waits for a key set later by another rank", "[gloo_store_adapter]") {
  ddp::InMemoryStore store(60s);
  ddp::detail::GlooStoreAdapter adapter(store, "p", 30s);
  std::thread writer([&] {
    ddp::detail::GlooStoreAdapter other(store, "p", 30s);
    other.wait({"go"});  // set by the reader once it is about to block
    other.set("1", {'x'});
  });
  adapter.set("go", {'1'});
  CHECK(adapter.get("1") == std::vector<char>{'x'});
  writer.join();
}

TEST_CASE("waits time out with the adapter's or the given budget", "[gloo_store_adapter]") {
  ddp::InMemoryStore store(60s);  // far longer than the adapter's budget
  ddp::detail::GlooStoreAdapter adapter(store, "p", 300ms);
  auto start = Clock::now();
  CHECK_THROWS_AS(adapter.get("missing"), ddp::TimeoutError);
  CHECK_THROWS_AS(adapter.wait({"missing"}), ddp::TimeoutError);
  // Gloo passes zero for "no timeout of its own": the adapter's budget applies.
  CHECK_THROWS_AS(adapter.wait({"missing"}, std::chrono::milliseconds(0)), ddp::TimeoutError);
  CHECK_THROWS_AS(adapter.wait({"missing"}, 100ms), ddp::TimeoutError);
  CHECK(Clock::now() - start < 20s);
}

TEST_CASE("the route to a loopback peer is the loopback address", "[local_address]") {
  CHECK(ddp::localAddressTowards("127.0.0.1", 29500) == "127.0.0.1");
}
