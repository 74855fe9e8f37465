// rendezvous_scale: N agents (threads in this process, each with its own TcpStoreClient
// connection) join one round through a running ddprund. Prints one JSON line per measurement.
//
//   join   : time from "go" until every agent's next() returned (min = max = N).
//   detect : N agents in one round (min = N-1, max = N); one is destroyed without leave()
//            (as SIGKILL would); time until every survivor saw kPeerLost, and until the
//            survivors' next round completed, next to the configured heartbeat timeout.
//
// Used by scripts/bench/rendezvous_scale.sh; not a test.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "rendezvous/base/logging.hpp"
#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/store/tcp_store_client.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::string host = "127.0.0.1";
  int port = 29400;
  int nodes = 16;
  std::string mode = "join";
  // torchrun's defaults (5 s x 3); the detect mode passes shorter ones.
  int heartbeatTimeoutMs = 15000;
  int keepAliveMs = 5000;
  int lastCallMs = 200;
  std::string runId = "bench";
};

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

std::vector<std::unique_ptr<ddp::TcpStoreClient>> connectAll(const Options& o) {
  std::vector<std::unique_ptr<ddp::TcpStoreClient>> clients;
  for (int i = 0; i < o.nodes; ++i) {
    ddp::TcpStoreClientOptions c;
    c.host = o.host;
    c.port = static_cast<uint16_t>(o.port);
    c.timeout = 120s;
    clients.push_back(std::make_unique<ddp::TcpStoreClient>(c));
  }
  return clients;
}

ddp::NodeDescriptor nodeFor(int i) {
  ddp::NodeDescriptor d;
  d.host = "bench-node-" + std::to_string(i);
  d.addr = "127.0.0.1";
  d.pid = 100000 + i;
  d.localWorldSize = 8;
  return d;
}

ddp::RendezvousSettings settingsFor(const Options& o, int minNodes, int maxNodes) {
  ddp::RendezvousSettings s;
  s.runId = o.runId;
  s.minNodes = minNodes;
  s.maxNodes = maxNodes;
  s.joinTimeout = 120s;
  s.lastCallTimeout = std::chrono::milliseconds(o.lastCallMs);
  s.keepAliveInterval = std::chrono::milliseconds(o.keepAliveMs);
  s.heartbeatTimeout = std::chrono::milliseconds(o.heartbeatTimeoutMs);
  return s;
}

struct JoinTimes {
  double firstMs = 0;   // the first agent's next() returned
  double medianMs = 0;
  double lastMs = 0;    // every agent's next() returned
};

// Runs next() on every agent at once and times when each returned.
JoinTimes joinAll(std::vector<std::unique_ptr<ddp::Rendezvous>>& agents) {
  std::barrier start(static_cast<std::ptrdiff_t>(agents.size() + 1));
  std::vector<std::thread> threads;
  std::vector<double> doneMs(agents.size());
  std::atomic<int> failures{0};
  Clock::time_point t0;
  for (size_t i = 0; i < agents.size(); ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        if (!std::holds_alternative<ddp::RendezvousResult>(agents[i]->next())) {
          throw std::runtime_error("the job ended before the round formed");
        }
        doneMs[i] = msSince(t0);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "next() failed: %s\n", e.what());
        ++failures;
      }
    });
  }
  t0 = Clock::now();
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  if (failures > 0) throw std::runtime_error(std::to_string(failures.load()) + " joins failed");
  std::sort(doneMs.begin(), doneMs.end());
  return {doneMs.front(), doneMs[doneMs.size() / 2], doneMs.back()};
}

int runJoin(const Options& o) {
  const auto c0 = Clock::now();
  auto clients = connectAll(o);
  const double connectMs = msSince(c0);
  std::vector<std::unique_ptr<ddp::Rendezvous>> agents;
  for (int i = 0; i < o.nodes; ++i) {
    agents.push_back(ddp::makeRendezvous(*clients[i], settingsFor(o, o.nodes, o.nodes), nodeFor(i)));
  }
  const JoinTimes t = joinAll(agents);
  std::printf("{\"mode\":\"join\",\"impl\":\"ddprun\",\"nodes\":%d,\"join_ms\":%.1f,"
              "\"first_ms\":%.1f,\"median_ms\":%.1f,\"connect_ms\":%.1f}\n",
              o.nodes, t.lastMs, t.firstMs, t.medianMs, connectMs);
  return 0;
}

int runDetect(const Options& o) {
  auto clients = connectAll(o);
  std::vector<std::unique_ptr<ddp::Rendezvous>> agents;
  for (int i = 0; i < o.nodes; ++i) {
    agents.push_back(ddp::makeRendezvous(*clients[i], settingsFor(o, o.nodes - 1, o.nodes),
                                         nodeFor(i)));
  }
  joinAll(agents);
  std::atomic<int> seen{0};
  std::promise<void> allSeen;
  for (size_t i = 1; i < agents.size(); ++i) {
    agents[i]->watch([&](const ddp::RendezvousEvent& e) {
      if (e.kind == ddp::RendezvousEventKind::kPeerLost && ++seen == o.nodes - 1) {
        allSeen.set_value();
      }
    });
  }
  const auto killedAt = Clock::now();
  agents[0].reset();  // no leave(): its heartbeats just stop
  allSeen.get_future().wait();
  const double detectMs = msSince(killedAt);
  agents.erase(agents.begin());
  for (auto& a : agents) a->stopWatching();
  joinAll(agents);
  const double roundMs = msSince(killedAt);
  std::printf("{\"mode\":\"detect\",\"impl\":\"ddprun\",\"nodes\":%d,\"heartbeat_timeout_ms\":%d,"
              "\"keep_alive_ms\":%d,\"last_call_ms\":%d,\"detect_ms\":%.1f,\"new_round_ms\":%.1f}\n",
              o.nodes, o.heartbeatTimeoutMs, o.keepAliveMs, o.lastCallMs, detectMs, roundMs);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"rendezvous_scale: time N in-process agents joining one round through ddprund"};
  app.add_option("--host", o.host, "ddprund address");
  app.add_option("--port", o.port, "ddprund port")->required();
  app.add_option("--nodes", o.nodes, "agents (one TCP connection each)")->check(CLI::Range(2, 100000));
  app.add_option("--mode", o.mode, "join | detect")->check(CLI::IsMember({"join", "detect"}));
  app.add_option("--heartbeat-timeout-ms", o.heartbeatTimeoutMs, "detect: heartbeat timeout");
  app.add_option("--keep-alive-ms", o.keepAliveMs, "keep-alive interval");
  app.add_option("--last-call-ms", o.lastCallMs, "detect: last-call timeout of the new round");
  app.add_option("--run-id", o.runId, "rendezvous id (use a fresh one per run)");
  CLI11_PARSE(app, argc, argv);
  ddp::setupLogging("warn");
  try {
    return o.mode == "join" ? runJoin(o) : runDetect(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rendezvous_scale: %s\n", e.what());
    return 1;
  }
}
