#include "rendezvous_scale_host.hpp"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <memory>
#include <thread>
#include <variant>
#include <vector>

#include "rendezvous/store/tcp_store_client.hpp"

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

std::vector<std::unique_ptr<ddp::TcpStoreClient>> connectAll(const HostSpec& spec) {
  std::vector<std::unique_ptr<ddp::TcpStoreClient>> clients;
  for (int i = 0; i < spec.count; ++i) {
    ddp::TcpStoreClientOptions c;
    c.endpoint = {spec.host, static_cast<uint16_t>(spec.port)};
    c.timeout = 120s;
    clients.push_back(std::make_unique<ddp::TcpStoreClient>(c));
  }
  return clients;
}

// CPU time of this whole process (every thread), user + system.
int64_t processCpuNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace

ddp::NodeDescriptor benchNode(int i) {
  ddp::NodeDescriptor d;
  d.host = "bench-node-" + std::to_string(i);
  d.addr = "127.0.0.1";
  d.pid = 100000 + i;
  d.localWorldSize = 8;
  return d;
}

bool writeAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool readAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    const ssize_t n = ::read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

int runAgentHost(const HostSpec& spec, int toParent, int fromParent) {
  const auto c0 = Clock::now();
  auto clients = connectAll(spec);
  std::vector<std::unique_ptr<ddp::Rendezvous>> agents;
  for (int i = 0; i < spec.count; ++i) {
    agents.push_back(
        ddp::makeRendezvous(*clients[i], spec.settings, benchNode(spec.firstAgent + i)));
  }
  std::latch parked(spec.count);
  std::latch go(1);
  // Agent threads stay until every agent of this host returned, so that no thread exits (freeing
  // its stack) while other agents are still being timed.
  std::latch returned(spec.count);
  std::latch release(1);
  std::vector<int64_t> doneNs(static_cast<size_t>(spec.count), 0);
  std::atomic<int32_t> failures{0};
  std::atomic<bool> run{false};
  std::vector<std::thread> threads;
  threads.reserve(agents.size());
  for (int i = 0; i < spec.count; ++i) {
    threads.emplace_back([&, i] {
      parked.count_down();
      go.wait();
      if (!run) return;
      try {
        if (!std::holds_alternative<ddp::RendezvousResult>(agents[i]->next())) {
          throw std::runtime_error("the job ended before the round formed");
        }
        doneNs[i] = nowNs();
      } catch (const std::exception& e) {
        std::fprintf(stderr, "agent %d: next() failed: %s\n", spec.firstAgent + i, e.what());
        ++failures;
      }
      returned.count_down();
      release.wait();
    });
  }
  parked.wait();
  const double connectMs = std::chrono::duration<double, std::milli>(Clock::now() - c0).count();
  char byte = 0;
  const bool started = writeAll(toParent, &connectMs, sizeof connectMs) &&
                       readAll(fromParent, &byte, 1);
  run = started;
  const int64_t cpuAtGo = processCpuNs();
  go.count_down();  // also when the parent is gone: the threads then end without joining
  if (started) returned.wait();
  const int64_t cpuNs = processCpuNs() - cpuAtGo;
  release.count_down();
  for (auto& t : threads) t.join();
  const int32_t failed = failures.load();
  const int32_t n = spec.count;
  const bool reported = started && writeAll(toParent, &failed, sizeof failed) &&
                        writeAll(toParent, &n, sizeof n) &&
                        writeAll(toParent, doneNs.data(), doneNs.size() * sizeof(int64_t)) &&
                        writeAll(toParent, &cpuNs, sizeof cpuNs);
  if (reported) readAll(fromParent, &byte, 1);
  agents.clear();
  return reported && failed == 0 ? 0 : 1;
}

}  // namespace bench
