// Who a StoreServer serves (docs/security.md): the token that ddprun clients present in HELLO,
// addresses served without one, the address allowlist, local processes of another user, the
// token kept out of every log line, and the rate limit of refusal warnings. Real loopback
// sockets; other users' processes are real too (setpriv to nobody, root only).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include <spdlog/sinks/ostream_sink.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/server/detail/refusal_log.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/raw_socket.hpp"
#include "tests/error_of.hpp"

using namespace ddp;
using namespace std::chrono_literals;

using ddp::testing::errorOf;

namespace {

constexpr const char* kToken = "tok-5e1c9a77-secret";

StoreServerOptions server(const std::string& token = "") {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.name = "secure-store";
  o.token = token;
  return o;
}

TcpStoreClientOptions client(uint16_t port, const std::string& token = "") {
  TcpStoreClientOptions o;
  o.endpoint.port = port;
  o.token = token;
  o.connectTimeout = 10s;  // refusals answer at once; only a busy machine needs the room
  o.timeout = 10s;
  return o;
}

std::unique_ptr<TcpStoreClient> hello(uint16_t port, const std::string& token = "") {
  return connectTcpStore(client(port, token), wire::kCapOnClose, {{"client", "test"}});
}

std::string v2(wire::Op op, std::string_view key = {}, std::string_view value = {}) {
  wire::Request r;
  r.op = op;
  r.key = key;
  r.value = value;
  r.nonce = 0xBEEF;
  std::string out;
  wire::encodeRequest(out, wire::Dialect::kV2, r);
  return out;
}

// VALIDATE, then `request`, then PING: true when the PING echo came back (the request was
// served), false when the server closed (or reset) the connection instead.
bool servedRaw(uint16_t port, const std::string& request, const std::string& source = "") {
  test::RawSocket sock(port, "127.0.0.1", source);
  try {
    sock.send(v2(wire::Op::kValidate) + request + v2(wire::Op::kPing));
    const std::string echo = sock.recv(4, 5s);
    uint32_t nonce = 0;
    std::memcpy(&nonce, echo.data(), 4);
    REQUIRE(nonce == 0xBEEF);
    return true;
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    INFO(what);
    REQUIRE((what.find("closed") != std::string::npos || what.find("reset") != std::string::npos ||
             what.find("Broken pipe") != std::string::npos));
    return false;
  }
}

// foreign_client.py's exit status (0 served, 10 refused), run as `user` ("" = this one).
int foreignPing(uint16_t port, const std::string& user) {
  const char* src = std::getenv("DDP_SOURCE_DIR");
  REQUIRE(src != nullptr);
  std::string cmd = "/usr/bin/python3 " + std::string(src) + "/tests/integration/foreign_client.py 127.0.0.1 " +
                    std::to_string(port) + " ping >&2";
  if (!user.empty()) cmd = "setpriv --reuid=" + user + " --regid=nogroup --clear-groups " + cmd;
  const int status = std::system(cmd.c_str());
  REQUIRE(WIFEXITED(status));
  return WEXITSTATUS(status);
}

// Captures what the "store" logger writes while alive.
class LogCapture {
 public:
  LogCapture() : sink_(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_)), log_(logger("store")) {
    level_ = log_->level();
    log_->set_level(spdlog::level::debug);
    log_->sinks().push_back(sink_);
  }
  ~LogCapture() {
    log_->sinks().pop_back();
    log_->set_level(level_);
  }
  std::string text() const { return out_.str(); }

 private:
  std::ostringstream out_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> sink_;
  std::shared_ptr<spdlog::logger> log_;
  spdlog::level::level_enum level_;
};

}  // namespace

TEST_CASE("a token server serves nothing but VALIDATE, PING and HELLO before the token", "[unit]") {
  StoreServerThread store(server(kToken));
  CHECK(servedRaw(store.port(), ""));  // the handshake itself
  CHECK_FALSE(servedRaw(store.port(), v2(wire::Op::kSet, "rdzv/job/ended", "failed")));
  CHECK_FALSE(servedRaw(store.port(), v2(wire::Op::kListKeys)));
  {  // a torch 1.13 client: v1 SET, never HELLO
    test::RawSocket sock(store.port());
    sock.send(std::string(1, '\0') + std::string("\x01\0\0\0\0\0\0\0k", 9) + std::string("\x01\0\0\0\0\0\0\0v", 9));
    CHECK(sock.closedByPeer(5s));
  }
  auto agent = hello(store.port(), kToken);
  CHECK_FALSE(agent->check({"rdzv/job/ended"}));  // the refused SET was not applied
  agent->set("k", "v");
  CHECK(agent->get("k") == "v");
}

TEST_CASE("a HELLO without the right token is refused with its reason", "[unit]") {
  StoreServerThread store(server(kToken));
  CHECK_THAT(errorOf<ConfigError>([&] { hello(store.port(), "not-the-token"); }), Catch::Matchers::Contains("refused this client: wrong token"));
  CHECK_THAT(errorOf<ConfigError>([&] { hello(store.port()); }), Catch::Matchers::Contains("HELLO without a token") &&
                           Catch::Matchers::Contains("token_file"));
  // The server keeps serving the others.
  hello(store.port(), kToken)->set("still", "up");
}

TEST_CASE("a server without a token serves everyone and ignores a token sent", "[unit]") {
  StoreServerThread store(server());
  CHECK(servedRaw(store.port(), v2(wire::Op::kSet, "k", "v")));
  hello(store.port(), "any-token")->set("k2", "v2");
}

TEST_CASE("addresses in allowUnauthenticated are served without a token", "[unit]") {
  auto options = server(kToken);
  options.allowUnauthenticated = AddressAllowlist::parse("127.0.0.2");
  StoreServerThread store(options);
  CHECK(servedRaw(store.port(), v2(wire::Op::kSet, "from-2", "v"), "127.0.0.2"));
  CHECK_FALSE(servedRaw(store.port(), v2(wire::Op::kSet, "from-1", "v"), "127.0.0.1"));
  auto agent = hello(store.port(), kToken);
  CHECK(agent->check({"from-2"}));
  CHECK_FALSE(agent->check({"from-1"}));
  // A wrong token is refused even from an exempt address (the client connects from 127.0.0.1,
  // so exempt 127.0.0.1 too): its sender expects to be checked.
  auto both = server(kToken);
  both.allowUnauthenticated = AddressAllowlist::loopback();
  StoreServerThread exempt(both);
  CHECK(servedRaw(exempt.port(), v2(wire::Op::kSet, "k", "v")));
  CHECK_THROWS_AS(hello(exempt.port(), "wrong"), ConfigError);
}

TEST_CASE("addresses outside the allowlist are closed before anything is read", "[unit]") {
  auto options = server();
  options.allow = AddressAllowlist::parse("127.0.0.2/32");
  LogCapture log;
  StoreServerThread store(options);
  CHECK_FALSE(servedRaw(store.port(), ""));
  CHECK(servedRaw(store.port(), v2(wire::Op::kSet, "k", "v"), "127.0.0.2"));
  CHECK_THAT(log.text(), Catch::Matchers::Contains("refused a connection from 127.0.0.1:") &&
                             Catch::Matchers::Contains("address not allowed (allowed: 127.0.0.2/32)"));
}

TEST_CASE("a local process of another user is refused when the server serves its own user only",
          "[unit]") {
  if (::geteuid() != 0) {
    WARN("skipped: needs root to run a client as nobody");
    return;
  }
  SECTION("otherLocalUsers kRefuse (agent-hosted stores)") {
    auto options = server();
    options.otherLocalUsers = StoreServerOptions::OtherLocalUsers::kRefuse;
    LogCapture log;
    StoreServerThread store(options);
    CHECK(foreignPing(store.port(), "nobody") == 10);
    CHECK(foreignPing(store.port(), "") == 0);
    CHECK_THAT(log.text(), Catch::Matchers::Contains("a local process of another user (uid 65534"));
  }
  SECTION("without it, nobody's process is served (what the rule prevents)") {
    StoreServerThread store(server());
    CHECK(foreignPing(store.port(), "nobody") == 0);
  }
}

TEST_CASE("the token never reaches a log line", "[unit]") {
  LogCapture log;
  {
    StoreServerThread store(server(kToken));
    hello(store.port(), kToken)->set("k", "v");
    CHECK_THROWS(hello(store.port(), std::string(kToken) + "-wrong"));
  }
  const std::string text = log.text();
  CHECK_THAT(text, Catch::Matchers::Contains("says HELLO") && Catch::Matchers::Contains("token=(redacted)"));
  CHECK(text.find("5e1c9a77") == std::string::npos);
}

TEST_CASE("refusal warnings are rate-limited per kind and count what they left out", "[unit]") {
  std::ostringstream out;
  spdlog::logger log("refusals", std::make_shared<spdlog::sinks::ostream_sink_st>(out));
  detail::RefusalLog refusals(std::chrono::seconds(5));
  const auto t0 = detail::RefusalLog::Clock::now();
  for (int i = 0; i < 5; ++i) {
    refusals.refused(log, "s", "10.0.0.1:" + std::to_string(i), detail::RefusalKind::kToken, "why",
                    t0 + std::chrono::seconds(i));
  }
  CHECK(refusals.total() == 5);
  std::string text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);  // the first; 4 within its window
  CHECK_THAT(text, Catch::Matchers::Contains("s: refused a connection from 10.0.0.1:0: why"));
  // Another kind has its own window.
  refusals.refused(log, "s", "10.0.0.2:1", detail::RefusalKind::kAddress, "outside",
                   t0 + std::chrono::seconds(4));
  CHECK_THAT(out.str(), Catch::Matchers::Contains("from 10.0.0.2:1: outside"));
  out.str("");
  refusals.refused(log, "s", "10.0.0.1:9", detail::RefusalKind::kToken, "why", t0 + std::chrono::seconds(6));
  text = out.str();
  CHECK_THAT(text, Catch::Matchers::Contains("from 10.0.0.1:9: why (4 more refused since the last "
                                             "such line)"));
  // What the last lines left out is logged when the server stops, once.
  refusals.refused(log, "s", "10.0.0.1:10", detail::RefusalKind::kToken, "why", t0 + std::chrono::seconds(7));
  refusals.refused(log, "s", "10.0.0.1:11", detail::RefusalKind::kToken, "why", t0 + std::chrono::seconds(8));
  out.str("");
  refusals.flush(log, "s");
  refusals.flush(log, "s");
  text = out.str();
  CHECK(std::count(text.begin(), text.end(), '\n') == 1);
  CHECK_THAT(text, Catch::Matchers::Contains("s: 2 more connections refused since the last such line"));
}
