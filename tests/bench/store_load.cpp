// store_load: a TCPStore load generator (benchmark program, not a test).
//
// N connections, each looping over rounds of SET k v, WAIT [k], GET k — what torch's client sends
// for store.set() followed by store.get() — speaking the v1a (torch 1.13) dialect on raw sockets,
// so the same generator measures ddprund and torch's own TCPStore server. Each request is its own
// write, as torch writes them. --threads io_context threads drive the connections (C++20
// coroutines; one coroutine per connection).
//
// Prints one line:  connections=N rounds=R requests_per_s=X rounds_per_s=Y p50_us=A p99_us=B
// (a round is 3 requests; latencies are per round, measured after --warmup).
// --fill K instead stores K keys over one connection and exits (for memory measurements).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <boost/asio.hpp>

#include "rendezvous/wire/wire_codec.hpp"

namespace {

namespace asio = boost::asio;
using asio::ip::tcp;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string host = "127.0.0.1";       // server address
  uint16_t port = 29400;                // server port
  int connections = 16;                 // concurrent connections
  double duration = 5.0;                // measured seconds (after warmup)
  double warmup = 0.5;                  // seconds run before measuring
  std::size_t valueBytes = 64;          // value size of each SET
  std::size_t fill = 0;                 // > 0: store this many keys and exit
  int threads = 1;                      // io_context threads driving the connections
};

struct Connection {
  std::string set, wait, get;  // the encoded requests of one round
  std::vector<uint32_t> latenciesUs;
  uint64_t rounds = 0;
  std::string error;
};

std::string encode(ddp::wire::Op op, const std::string& key, const std::string& value = {}) {
  std::string out;
  ddp::wire::Request request;
  request.op = op;
  request.key = key;
  request.value = value;
  std::string_view keys[] = {key};
  if (op == ddp::wire::Op::kWait || op == ddp::wire::Op::kGetNumKeys) {
    request.keys = keys;
  }
  ddp::wire::encodeRequest(out, ddp::wire::Dialect::kV1a, request);
  return out;
}

asio::awaitable<void> runConnection(tcp::endpoint server, Connection& c, Clock::time_point measure,
                                    Clock::time_point end) {
  try {
    tcp::socket socket(co_await asio::this_coro::executor);
    co_await socket.async_connect(server, asio::use_awaitable);
    socket.set_option(tcp::no_delay(true));
    uint8_t status = 0;
    uint64_t length = 0;
    std::string value;
    for (;;) {
      const auto start = Clock::now();
      if (start >= end) break;
      co_await asio::async_write(socket, asio::buffer(c.set), asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(c.wait), asio::use_awaitable);
      co_await asio::async_read(socket, asio::buffer(&status, 1), asio::use_awaitable);
      co_await asio::async_write(socket, asio::buffer(c.get), asio::use_awaitable);
      co_await asio::async_read(socket, asio::buffer(&length, 8), asio::use_awaitable);
      value.resize(length);
      co_await asio::async_read(socket, asio::buffer(value), asio::use_awaitable);
      const auto done = Clock::now();
      if (start >= measure && done <= end) {
        ++c.rounds;
        c.latenciesUs.push_back(static_cast<uint32_t>(
            std::chrono::duration_cast<std::chrono::microseconds>(done - start).count()));
      }
    }
  } catch (const std::exception& e) {
    c.error = e.what();
  }
}

uint32_t percentile(std::vector<uint32_t>& all, double p) {
  if (all.empty()) return 0;
  const std::size_t index = std::min(all.size() - 1, static_cast<std::size_t>(p * all.size()));
  std::nth_element(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(index), all.end());
  return all[index];
}

int runLoad(const Options& options, const tcp::endpoint& server) {
  asio::io_context io;
  const auto measure = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(options.warmup));
  const auto end = measure + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(options.duration));
  std::vector<std::unique_ptr<Connection>> connections;
  const std::string value(options.valueBytes, 'v');
  for (int i = 0; i < options.connections; ++i) {
    auto c = std::make_unique<Connection>();
    const std::string key = "/bench/" + std::to_string(i);
    c->set = encode(ddp::wire::Op::kSet, key, value);
    c->wait = encode(ddp::wire::Op::kWait, key);
    c->get = encode(ddp::wire::Op::kGet, key);
    asio::co_spawn(io, runConnection(server, *c, measure, end), asio::detached);
    connections.push_back(std::move(c));
  }
  std::vector<std::thread> runners;
  for (int t = 1; t < options.threads; ++t) runners.emplace_back([&io] { io.run(); });
  io.run();
  for (auto& runner : runners) runner.join();

  std::vector<uint32_t> all;
  uint64_t rounds = 0;
  int failed = 0;
  for (const auto& c : connections) {
    rounds += c->rounds;
    all.insert(all.end(), c->latenciesUs.begin(), c->latenciesUs.end());
    if (!c->error.empty()) {
      if (failed++ == 0) std::fprintf(stderr, "store_load: connection failed: %s\n", c->error.c_str());
    }
  }
  const double perSecond = static_cast<double>(rounds) / options.duration;
  std::printf("connections=%d rounds=%llu requests_per_s=%.0f rounds_per_s=%.0f p50_us=%u "
              "p99_us=%u failed=%d\n",
              options.connections, static_cast<unsigned long long>(rounds), 3 * perSecond,
              perSecond, percentile(all, 0.50), percentile(all, 0.99), failed);
  return failed == 0 ? 0 : 1;
}

// Stores `fill` keys over one connection (SETs in batches), then syncs with GETNUMKEYS.
int runFill(const Options& options, const tcp::endpoint& server) {
  asio::io_context io;
  tcp::socket socket(io);
  socket.connect(server);
  const std::string value(options.valueBytes, 'v');
  std::string batch;
  for (std::size_t i = 0; i < options.fill; ++i) {
    batch += encode(ddp::wire::Op::kSet, "/bench/fill/" + std::to_string(i), value);
    if (batch.size() > (1 << 16) || i + 1 == options.fill) {
      asio::write(socket, asio::buffer(batch));
      batch.clear();
    }
  }
  asio::write(socket, asio::buffer(encode(ddp::wire::Op::kGetNumKeys, "")));
  int64_t keys = 0;
  asio::read(socket, asio::buffer(&keys, sizeof(keys)));
  std::printf("stored=%zu keys_in_store=%lld\n", options.fill, static_cast<long long>(keys));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  CLI::App app{"store_load: TCPStore load generator (v1a SET+WAIT+GET rounds)"};
  app.add_option("--host", options.host, "server address");
  app.add_option("--port", options.port, "server port")->required();
  app.add_option("--connections", options.connections, "concurrent connections")
      ->check(CLI::Range(1, 100000));
  app.add_option("--duration", options.duration, "measured seconds");
  app.add_option("--warmup", options.warmup, "seconds before measuring");
  app.add_option("--value-bytes", options.valueBytes, "bytes per value");
  app.add_option("--fill", options.fill, "store this many keys and exit");
  app.add_option("--threads", options.threads, "io_context threads")->check(CLI::Range(1, 256));
  CLI11_PARSE(app, argc, argv);
  try {
    asio::io_context resolverIo;
    tcp::resolver resolver(resolverIo);
    const tcp::endpoint server = *resolver.resolve(options.host, std::to_string(options.port)).begin();
    return options.fill > 0 ? runFill(options, server) : runLoad(options, server);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "store_load: %s\n", e.what());
    return 1;
  }
}
