// Helpers for rendezvous tests: agents as threads over one shared Store, with short timeouts.
//
// Thread safety: an Agent is driven by one test thread at a time; its events are collected under a
// mutex and can be awaited from any thread.
#pragma once

#include <catch2/catch.hpp>

#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/store/store.hpp"

namespace ddp::test {

using namespace std::chrono_literals;

// Short timeouts that still hold on a busy 2-core CI machine.
inline RendezvousSettings fastSettings(const std::string& runId, int minNodes, int maxNodes) {
  RendezvousSettings s;
  s.runId = runId;
  s.minNodes = minNodes;
  s.maxNodes = maxNodes;
  s.joinTimeout = 20s;
  s.lastCallTimeout = 300ms;
  s.closeTimeout = 5s;
  s.keepAliveInterval = 100ms;
  // Generous, so a starved thread on a busy CI machine is not declared lost; liveness tests
  // lower it.
  s.heartbeatTimeout = 3s;
  s.maxRestarts = 0;
  return s;
}

inline NodeDescriptor node(const std::string& host, int localWorldSize = 1, int requestedRank = -1) {
  NodeDescriptor d;
  d.host = host;
  d.addr = "10.0.0." + std::to_string(host.size());
  d.pid = 1000 + static_cast<int>(std::hash<std::string>{}(host) % 1000);
  d.localWorldSize = localWorldSize;
  d.requestedRank = requestedRank;
  return d;
}

// Collects watch() events; waitFor() blocks until one arrives (or the budget passes).
class EventSink {
 public:
  std::function<void(const RendezvousEvent&)> callback() {
    return [this](const RendezvousEvent& e) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        events_.push_back(e);
      }
      cv_.notify_all();
    };
  }
  std::optional<RendezvousEvent> waitFor(std::chrono::milliseconds budget) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!cv_.wait_for(lock, budget, [&] { return !events_.empty(); })) return std::nullopt;
    return events_.front();
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_.size();
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    events_.clear();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<RendezvousEvent> events_;
};

// One agent: a Rendezvous plus its event sink. `heartbeatStore` as in makeRendezvous() (empty:
// the heartbeat thread shares `store`).
struct Agent {
  Agent(Store& store, RendezvousSettings settings, NodeDescriptor self,
        StoreConnector heartbeatStore = {})
      : rdzv(makeRendezvous(store, std::move(settings), std::move(self),
                            std::move(heartbeatStore))) {}
  std::unique_ptr<Rendezvous> rdzv;
  EventSink events;
  void watch() { rdzv->watch(events.callback()); }
};

// The round next() joined; throws (failing the test) when it reported the job's end instead.
inline RendezvousResult joined(NextResult outcome) {
  if (auto* ended = std::get_if<JobEnded>(&outcome)) {
    throw std::runtime_error("next() reported the job's end instead of a round: " + ended->reason);
  }
  return std::get<RendezvousResult>(std::move(outcome));
}

// What next() reported when the job ended; throws (failing the test) when it joined a round.
inline JobEnded ended(NextResult outcome) {
  if (auto* round = std::get_if<RendezvousResult>(&outcome)) {
    throw std::runtime_error("next() joined generation " + std::to_string(round->generation) +
                             " instead of reporting the job's end");
  }
  return std::get<JobEnded>(std::move(outcome));
}

// The event a wait returned when the round ended; throws when it returned something else.
template <typename Result>
RendezvousEvent roundEnded(const Result& result) {
  if (auto* end = std::get_if<RoundEnded>(&result)) return end->event;
  throw std::runtime_error("the call returned before its round ended");
}

// Runs next() on every agent concurrently and returns the results in agent order.
inline std::vector<RendezvousResult> joinAll(std::vector<Agent*> agents) {
  std::vector<std::future<RendezvousResult>> futures;
  for (Agent* a : agents) {
    futures.push_back(std::async(std::launch::async, [a] { return joined(a->rdzv->next()); }));
  }
  std::vector<RendezvousResult> results;
  for (auto& f : futures) results.push_back(f.get());
  return results;
}

// Checks that the results (one per member, each agent's own view) describe one consistent round:
// the same generation, node count and world size, node ranks 0..n-1 once each, and global ranks
// that are contiguous per node in node-rank order (base ranks ascending from 0).
inline void checkConsistent(const std::vector<RendezvousResult>& results) {
  REQUIRE_FALSE(results.empty());
  const auto& first = results.front();
  std::vector<const RendezvousResult*> byRank(first.nodeCount, nullptr);
  for (const auto& r : results) {
    CHECK(r.generation == first.generation);
    CHECK(r.nodeCount == first.nodeCount);
    CHECK(r.worldSize == first.worldSize);
    REQUIRE(r.nodeRank >= 0);
    REQUIRE(r.nodeRank < first.nodeCount);
    CHECK(byRank[r.nodeRank] == nullptr);
    byRank[r.nodeRank] = &r;
  }
  if (results.size() != static_cast<size_t>(first.nodeCount)) return;  // not every member here
  int previous = -1;
  for (const RendezvousResult* r : byRank) {
    REQUIRE(r != nullptr);
    CHECK(r->baseRank > previous);
    CHECK(r->baseRank < r->worldSize);
    previous = r->baseRank;
  }
  CHECK(byRank[0]->baseRank == 0);
}

}  // namespace ddp::test
