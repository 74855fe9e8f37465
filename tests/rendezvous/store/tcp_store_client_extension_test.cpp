// TcpStoreClient's side of ddprun's wire extension (HELLO, ON_CLOSE, the farewell ON_CLOSE_CLEAR),
// its interruptible waits and per-call deadlines: against StoreServerThread, and against scripted
// fake servers where a real one cannot misbehave on cue (no extension; a server that stops
// answering).
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/fakes/scripted_server.hpp"

namespace ddp {
namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using test::FakeServer;
using test::readHandshake;

StoreServerOptions loopbackServer() {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.name = "extension-test store";
  return options;
}

TcpStoreClientOptions optionsFor(uint16_t port, std::chrono::milliseconds timeout = 30s) {
  TcpStoreClientOptions options;
  options.endpoint = {"127.0.0.1", port};
  options.connectTimeout = 30s;
  options.timeout = timeout;
  return options;
}

const std::vector<HelloField> kFields = {{"client", "ddprun"}, {"purpose", "test"}};

// The bytes `request` takes on a v2 connection.
std::string encoded(const wire::Request& request) {
  std::string out;
  wire::encodeRequest(out, wire::Dialect::kV2, request);
  return out;
}

std::string readExactly(asio::ip::tcp::socket& socket, std::size_t n) {
  std::string bytes(n, '\0');
  asio::read(socket, asio::buffer(bytes));
  return bytes;
}

// Reads the bytes of `request`; throws (Catch's macros are for the test thread only) otherwise.
void expectRequest(asio::ip::tcp::socket& socket, const wire::Request& request) {
  const std::string want = encoded(request);
  if (readExactly(socket, want.size()) != want) {
    throw std::runtime_error(std::string("unexpected bytes instead of ") +
                             std::string(wire::opName(request.op)));
  }
}

// Everything the peer sends until it closes.
std::string readToEnd(asio::ip::tcp::socket& socket) {
  std::string bytes;
  boost::system::error_code ec;
  char chunk[256];
  for (;;) {
    const std::size_t n = socket.read_some(asio::buffer(chunk), ec);
    bytes.append(chunk, n);
    if (ec) return bytes;
  }
}

void answerHandshake(asio::ip::tcp::socket& socket) {
  const uint32_t nonce = readHandshake(socket);
  asio::write(socket, asio::buffer(&nonce, sizeof(nonce)));
}

// Answers the handshake, HELLO (granting ON_CLOSE) and `arm`, then reads `add` (unanswered).
void serveUntilAdd(asio::ip::tcp::socket& socket, const wire::Request& arm,
                   const wire::Request& add) {
  answerHandshake(socket);
  std::vector<std::string_view> fields;
  for (const auto& [name, value] : kFields) {
    fields.emplace_back(name);
    fields.emplace_back(value);
  }
  wire::Request hello;
  hello.op = wire::Op::kHello;
  hello.version = wire::kExtensionVersion;
  hello.capabilities = wire::kCapOnClose;
  hello.keys = fields;
  expectRequest(socket, hello);
  std::string reply;
  wire::encodeHelloReply(reply, wire::kHelloAccepted, wire::kCapOnClose, {});
  asio::write(socket, asio::buffer(reply));
  expectRequest(socket, arm);
  const int64_t one = 1;
  asio::write(socket, asio::buffer(&one, sizeof(one)));
  expectRequest(socket, add);
}

}  // namespace

TEST_CASE("hello() is granted ON_CLOSE by StoreServer; a destroyed client applies it",
          "[tcp_store_client][extension]") {
  StoreServerThread server(loopbackServer());
  TcpStoreClient watcher(optionsFor(server.port()));
  {
    TcpStoreClient client(optionsFor(server.port()));
    CHECK_FALSE(client.onCloseSupported());
    CHECK_THROWS_AS(client.armOnClose("end", "", "lost"), ProtocolError);  // no HELLO yet
    const auto answer = client.hello(wire::kCapOnClose, kFields);
    REQUIRE(answer);
    CHECK(answer->accepted);
    CHECK(answer->version == wire::kExtensionVersion);
    CHECK((answer->capabilities & wire::kCapOnClose) != 0);
    CHECK((answer->capabilities & wire::kCapDurable) == 0);  // no --data-dir
    REQUIRE(answer->fields.size() == 2);
    CHECK(answer->fields[0] == HelloField{"server", "ddprun store"});
    CHECK(answer->fields[1].first == "instance");
    CHECK(answer->fields[1].second.size() == 16);
    CHECK(client.onCloseSupported());
    client.armOnClose("end", "", "lost");
    client.armOnClose("cleared", "", "x");
    client.clearOnClose({"cleared"});
    client.armOnClose("sentinel", "", "s");
    client.set("k", "v");  // the connection keeps serving the Store interface
    CHECK(client.get("k") == "v");
  }
  watcher.wait({"sentinel", "end"}, 20s);
  CHECK(watcher.get("end") == "lost");
  CHECK_FALSE(watcher.check({"cleared"}));
}

TEST_CASE("a server without the extension: hello() gives nullopt, connectTcpStore falls back",
          "[tcp_store_client][extension]") {
  std::atomic<int> connections{0};
  FakeServer server([&](asio::ip::tcp::socket& socket) {
    ++connections;
    answerHandshake(socket);
    char op = 0;
    asio::read(socket, asio::buffer(&op, 1));
    if (static_cast<uint8_t>(op) == 0xF0) return;  // torch: unknown opcode, close
    // ADD: str key, i64 delta -> i64 7
    uint64_t len = 0;
    asio::read(socket, asio::buffer(&len, sizeof(len)));
    readExactly(socket, len + sizeof(int64_t));
    const int64_t seven = 7;
    asio::write(socket, asio::buffer(&seven, sizeof(seven)));
    readToEnd(socket);
  });
  SECTION("hello() on one client") {
    TcpStoreClient client(optionsFor(server.port()));
    CHECK_FALSE(client.hello(wire::kCapOnClose, kFields));
    CHECK_FALSE(client.onCloseSupported());
    CHECK_THROWS_AS(client.add("k", 1), NetworkError);  // sticky: use a new client
  }
  SECTION("connectTcpStore") {
    auto client = connectTcpStore(optionsFor(server.port()), wire::kCapOnClose, kFields);
    CHECK_FALSE(client->onCloseSupported());
    CHECK(client->add("k", 1) == 7);
    CHECK(connections.load() == 2);
  }
}

TEST_CASE("a client that gives its connection up clears its registrations first",
          "[tcp_store_client][extension]") {
  std::promise<std::string> afterAdd;
  wire::Request add;
  add.op = wire::Op::kAdd;
  add.key = "hb";
  add.number = 1;
  wire::Request arm;
  arm.op = wire::Op::kOnClose;
  arm.key = "end";
  arm.desired = "lost";
  FakeServer server([&](asio::ip::tcp::socket& socket) {
    try {
      serveUntilAdd(socket, arm, add);
      afterAdd.set_value(readToEnd(socket));  // ...and never answer the ADD
    } catch (const std::exception&) {
      afterAdd.set_exception(std::current_exception());
    }
  });
  auto result = afterAdd.get_future();
  {
    TcpStoreClient client(optionsFor(server.port(), 300ms));
    REQUIRE(client.hello(wire::kCapOnClose, kFields));
    client.armOnClose("end", "", "lost");
    CHECK_THROWS_AS(client.add("hb", 1), TimeoutError);
    CHECK_THROWS_AS(client.add("hb", 1), NetworkError);  // sticky
  }
  REQUIRE(result.wait_for(20s) == std::future_status::ready);
  wire::Request clearAll;
  clearAll.op = wire::Op::kOnCloseClear;
  CHECK(result.get() == encoded(clearAll));  // ON_CLOSE_CLEAR of everything, then EOF
}

TEST_CASE("interruptWait() ends a wait early; the client stays usable",
          "[tcp_store_client][extension]") {
  StoreServerThread server(loopbackServer());
  TcpStoreClient client(optionsFor(server.port()));
  SECTION("a wait in progress") {
    auto waiting = std::async(std::launch::async, [&] {
      try {
        client.wait({"never"}, 60s);
        return std::string("returned");
      } catch (const TimeoutError& e) {
        return std::string(e.what());
      }
    });
    client.interruptWait();
    REQUIRE(waiting.wait_for(20s) == std::future_status::ready);  // not after 60 s
    CHECK_THAT(waiting.get(), Catch::Contains("never"));
  }
  SECTION("latched until a wait consumes it") {
    client.interruptWait();
    const auto start = Clock::now();
    CHECK_THROWS_WITH(client.wait({"never"}, 60s), Catch::Contains("interrupted"));
    CHECK(Clock::now() - start < 20s);
    CHECK_THROWS_WITH(client.wait({"never"}, 100ms), Catch::Contains("timed out after 100 ms"));
  }
  client.set("k", "v");
  CHECK(client.get("k") == "v");
  CHECK(client.add("n", 2) == 2);
}

TEST_CASE("the CANCEL_WAIT after a wait timeout is bounded by timeout(), not 30 s",
          "[tcp_store_client][extension]") {
  FakeServer server([&](asio::ip::tcp::socket& socket) {
    answerHandshake(socket);
    readToEnd(socket);  // a server that stopped answering (SIGSTOP)
  });
  TcpStoreClient client(optionsFor(server.port(), 300ms));
  const auto start = Clock::now();
  CHECK_THROWS_AS(client.wait({"k"}, 100ms), TimeoutError);
  CHECK(Clock::now() - start < 10s);
  CHECK_THROWS_AS(client.check({"k"}), NetworkError);  // out of step: sticky
}

}  // namespace ddp
