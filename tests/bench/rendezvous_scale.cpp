// rendezvous_scale: N agents join one round through a running ddprund. Prints one JSON line per
// measurement.
//
//   join   : N agents (threads with one TcpStoreClient connection each, spread over processes of
//            at most --agents-per-process; see rendezvous_scale_host.hpp) call next() at once
//            (min = max = N); time from "go" until the first, the median and the last returned,
//            and the CPU time spent meanwhile by the agent processes and (--daemon-pid) ddprund.
//   detect : N agents in one round (min = N-1, max = N), one process; one is destroyed without
//            leave() (as SIGKILL would); time until every survivor saw kPeerLost, and until the
//            survivors' next round completed, next to the configured heartbeat timeout.
//
// Used by scripts/bench/rendezvous_scale.sh; not a test.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <CLI/CLI.hpp>

#include "rendezvous/algorithm/rendezvous.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous_scale_host.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

struct Options {
  std::string host = "127.0.0.1";
  int port = 29400;
  int nodes = 16;
  std::string mode = "join";
  int agentsPerProcess = 2048;
  // torchrun's defaults (5 s x 3); the detect mode passes shorter ones.
  int heartbeatTimeoutMs = 15000;
  int keepAliveMs = 5000;
  int lastCallMs = 200;
  std::string runId = "bench";
  int daemonPid = 0;  // join: ddprund's pid, for its CPU time during the join (0: not measured)
};

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
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

struct Host {
  pid_t pid = -1;
  int toChild = -1;
  int fromChild = -1;
};

Host startHost(const bench::HostSpec& spec) {
  int down[2];
  int up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    ::close(down[1]);
    ::close(up[0]);
    std::fflush(stdout);
    ::_exit(bench::runAgentHost(spec, up[1], down[0]));
  }
  ::close(down[0]);
  ::close(up[1]);
  return Host{pid, down[1], up[0]};
}

// CPU time (user + system) process `pid` spent so far, in ms; -1 when unknown. Clock-tick
// granularity (10 ms here).
double processCpuMs(int pid) {
  if (pid <= 0) return -1;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (f == nullptr) return -1;
  char buf[1024] = {};
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const char* p = std::strrchr(buf, ')');
  if (n == 0 || p == nullptr) return -1;
  unsigned long long utime = 0;
  unsigned long long stime = 0;
  if (std::sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime,
                  &stime) != 2) {
    return -1;
  }
  return static_cast<double>(utime + stime) * 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// Reads one host's join report; appends its done times (ms after t0) and adds its CPU time to
// cpuMs. Returns its failures, or -1 when it reported nothing.
int readReport(const Host& h, int64_t t0Ns, std::vector<double>& doneMs, double& cpuMs) {
  int32_t failed = 0;
  int32_t n = 0;
  if (!bench::readAll(h.fromChild, &failed, sizeof failed) ||
      !bench::readAll(h.fromChild, &n, sizeof n)) {
    return -1;
  }
  std::vector<int64_t> ns(static_cast<size_t>(n));
  int64_t cpuNs = 0;
  if (!bench::readAll(h.fromChild, ns.data(), ns.size() * sizeof(int64_t)) ||
      !bench::readAll(h.fromChild, &cpuNs, sizeof cpuNs)) {
    return -1;
  }
  cpuMs += static_cast<double>(cpuNs) / 1e6;
  for (int64_t t : ns) {
    if (t > 0) doneMs.push_back(static_cast<double>(t - t0Ns) / 1e6);
  }
  return failed;
}

int runJoin(const Options& o) {
  std::vector<Host> hosts;
  for (int first = 0; first < o.nodes; first += o.agentsPerProcess) {
    bench::HostSpec spec{o.host, o.port, first, std::min(o.agentsPerProcess, o.nodes - first),
                         settingsFor(o, o.nodes, o.nodes)};
    hosts.push_back(startHost(spec));
  }
  double connectMs = 0;
  bool ready = true;
  for (const Host& h : hosts) {
    double ms = 0;
    ready = bench::readAll(h.fromChild, &ms, sizeof ms) && ready;
    connectMs = std::max(connectMs, ms);
  }
  const char go = ready ? 'g' : 'x';
  const double daemonCpuAtGo = processCpuMs(o.daemonPid);
  const int64_t t0Ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
  for (const Host& h : hosts) bench::writeAll(h.toChild, &go, 1);
  std::vector<double> doneMs;
  double agentsCpuMs = 0;
  int failures = ready ? 0 : o.nodes;
  for (const Host& h : hosts) {
    const int failed = ready ? readReport(h, t0Ns, doneMs, agentsCpuMs) : 0;
    failures += failed < 0 ? 1 : failed;
  }
  // Until the last host reported (slightly after its last agent returned).
  const double daemonCpuMs =
      daemonCpuAtGo < 0 ? -1 : processCpuMs(o.daemonPid) - daemonCpuAtGo;
  for (const Host& h : hosts) {
    bench::writeAll(h.toChild, &go, 1);
    ::close(h.toChild);
    ::close(h.fromChild);
    int status = 0;
    ::waitpid(h.pid, &status, 0);
  }
  if (failures > 0 || doneMs.size() != static_cast<size_t>(o.nodes)) {
    std::fprintf(stderr, "rendezvous_scale: %d agent(s) or host(s) failed\n", failures);
    return 1;
  }
  std::sort(doneMs.begin(), doneMs.end());
  std::printf("{\"mode\":\"join\",\"impl\":\"ddprun\",\"nodes\":%d,\"join_ms\":%.1f,"
              "\"first_ms\":%.1f,\"median_ms\":%.1f,\"connect_ms\":%.1f,\"processes\":%zu,"
              "\"agents_cpu_ms\":%.0f,\"daemon_cpu_ms\":%.0f}\n",
              o.nodes, doneMs.back(), doneMs.front(), doneMs[doneMs.size() / 2], connectMs,
              hosts.size(), agentsCpuMs, daemonCpuMs);
  return 0;
}

// Runs next() on every agent at once; returns when all returned.
void joinAll(std::vector<std::unique_ptr<ddp::Rendezvous>>& agents) {
  std::barrier start(static_cast<std::ptrdiff_t>(agents.size() + 1));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (size_t i = 0; i < agents.size(); ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      try {
        if (!std::holds_alternative<ddp::RendezvousResult>(agents[i]->next())) {
          throw std::runtime_error("the job ended before the round formed");
        }
      } catch (const std::exception& e) {
        std::fprintf(stderr, "next() failed: %s\n", e.what());
        ++failures;
      }
    });
  }
  start.arrive_and_wait();
  for (auto& t : threads) t.join();
  if (failures > 0) throw std::runtime_error(std::to_string(failures.load()) + " joins failed");
}

int runDetect(const Options& o) {
  std::vector<std::unique_ptr<ddp::TcpStoreClient>> clients;
  std::vector<std::unique_ptr<ddp::Rendezvous>> agents;
  for (int i = 0; i < o.nodes; ++i) {
    ddp::TcpStoreClientOptions c;
    c.endpoint = {o.host, static_cast<uint16_t>(o.port)};
    c.timeout = 120s;
    clients.push_back(std::make_unique<ddp::TcpStoreClient>(c));
    agents.push_back(ddp::makeRendezvous(*clients.back(), settingsFor(o, o.nodes - 1, o.nodes),
                                         bench::benchNode(i)));
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
  CLI::App app{"rendezvous_scale: time N agents joining one round through ddprund"};
  app.add_option("--host", o.host, "ddprund address");
  app.add_option("--port", o.port, "ddprund port")->required();
  app.add_option("--nodes", o.nodes, "agents (one TCP connection each)")->check(CLI::Range(2, 100000));
  app.add_option("--mode", o.mode, "join | detect")->check(CLI::IsMember({"join", "detect"}));
  app.add_option("--agents-per-process", o.agentsPerProcess,
                 "join: most agents per process (each connection holds 5 file descriptors)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--heartbeat-timeout-ms", o.heartbeatTimeoutMs, "heartbeat timeout");
  app.add_option("--keep-alive-ms", o.keepAliveMs, "keep-alive interval");
  app.add_option("--last-call-ms", o.lastCallMs, "detect: last-call timeout of the new round");
  app.add_option("--run-id", o.runId, "rendezvous id (use a fresh one per run)");
  app.add_option("--daemon-pid", o.daemonPid,
                 "join: ddprund's pid (same machine), to report its CPU time during the join");
  CLI11_PARSE(app, argc, argv);
  ddp::setupLogging("warn");
  try {
    return o.mode == "join" ? runJoin(o) : runDetect(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rendezvous_scale: %s\n", e.what());
    return 1;
  }
}
