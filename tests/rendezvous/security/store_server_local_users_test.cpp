// Who a StoreServer serves on this machine, and how long strangers may wait (issue 18 item 3,
// issue 19 items 3 and 4): other users' local processes under each OtherLocalUsers rule, an owner
// the kernel cannot name (never fail open), and on a token server the bounds on connections that
// have not presented the token (HELLO deadline, per-peer and total caps). Real loopback sockets;
// other users' processes are real (setpriv to nobody, root only); the owner lookup that fails is a
// fake wrapping the real one.
#include <catch2/catch.hpp>

#include <errno.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <spdlog/sinks/ostream_sink.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"
#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/security/peer_owner.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/raw_socket.hpp"

using namespace ddp;
using namespace std::chrono_literals;
using Others = StoreServerOptions::OtherLocalUsers;

namespace {

constexpr const char* kToken = "tok-local-users-1c9a";

StoreServerOptions server(Others others, const std::string& token = "") {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.name = "local-store";
  o.otherLocalUsers = others;
  o.token = token;
  return o;
}

std::unique_ptr<TcpStoreClient> hello(uint16_t port, const std::string& token) {
  TcpStoreClientOptions o;
  o.endpoint.port = port;
  o.token = token;
  o.connectTimeout = 10s;
  o.timeout = 10s;
  return connectTcpStore(o, 0, {{"client", "test"}});
}

// VALIDATE + SET + PING on a raw connection: true when the PING came back (the SET was served).
bool servedRaw(uint16_t port) {
  test::RawSocket sock(port);
  std::string bytes;
  wire::Request validate;
  validate.op = wire::Op::kValidate;
  wire::encodeRequest(bytes, wire::Dialect::kV2, validate);
  wire::Request set;
  set.op = wire::Op::kSet;
  set.key = "k";
  set.value = "v";
  wire::encodeRequest(bytes, wire::Dialect::kV2, set);
  wire::Request ping;
  ping.op = wire::Op::kPing;
  ping.nonce = 0xBEEF;
  wire::encodeRequest(bytes, wire::Dialect::kV2, ping);
  try {
    sock.send(bytes);
    return sock.recv(4, 10s).size() == 4;
  } catch (const std::runtime_error&) {
    return false;
  }
}

// foreign_client.py's exit status (0 served, 10 refused) for `action`, run as `user` ("" = this
// one), presenting `token` in HELLO when given.
int foreign(uint16_t port, const std::string& user, const std::string& action,
            const std::string& token = "") {
  const char* src = std::getenv("DDP_SOURCE_DIR");
  REQUIRE(src != nullptr);
  std::string cmd = "/usr/bin/python3 " + std::string(src) +
                    "/tests/integration/foreign_client.py 127.0.0.1 " + std::to_string(port) + " " +
                    action + (token.empty() ? "" : " --token " + token) + " >&2";
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

// The kernel's answer, failed on command: as if the netlink socket could not be had.
class FailingOwners final : public PeerOwnerLookup {
 public:
  explicit FailingOwners(int error) : error_(error) {}
  PeerOwner owner(const boost::asio::ip::tcp::endpoint& local,
                  const boost::asio::ip::tcp::endpoint& peer) override {
    ++calls;
    if (error_ == 0) return PeerOwnerLookup::owner(local, peer);
    return {PeerOwner::Kind::kUnknown, 0, std::string("netlink socket: ") + std::strerror(error_),
            error_};
  }
  int calls = 0;

 private:
  int error_;
};

std::size_t lines(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

bool isRoot() {
  if (::geteuid() == 0) return true;
  WARN("skipped: needs root to run a client as nobody");
  return false;
}

}  // namespace

TEST_CASE("a local connection whose owner the kernel cannot name is refused, not trusted",
          "[unit]") {
  auto options = server(Others::kRefuse);
  auto owners = std::make_shared<FailingOwners>(EPROTONOSUPPORT);
  options.peerOwners = owners;
  LogCapture log;
  {
    StoreServerThread store(options);
    for (int i = 0; i < 5; ++i) CHECK_FALSE(servedRaw(store.port()));
  }
  CHECK(owners->calls >= 5);
  const std::string text = log.text();
  CHECK_THAT(text, Catch::Matchers::Contains("cannot tell which user owns this local connection "
                                             "(netlink socket: Protocol not supported)"));
  CHECK(lines(text, "cannot tell which user owns") == 1);  // rate-limited
  CHECK(text.find("accepted by address only") == std::string::npos);
}

TEST_CASE("trustUnknownLocalOwner, set explicitly, judges such a connection by address", "[unit]") {
  auto options = server(Others::kRefuse);
  options.peerOwners = std::make_shared<FailingOwners>(EPROTONOSUPPORT);
  options.trustUnknownLocalOwner = true;
  StoreServerThread store(options);
  CHECK(servedRaw(store.port()));
}

TEST_CASE("on a token server an unknown owner must present the token, whatever its address",
          "[unit]") {
  auto options = server(Others::kAuthenticate, kToken);
  options.peerOwners = std::make_shared<FailingOwners>(EPROTONOSUPPORT);
  options.allowUnauthenticated = AddressAllowlist::loopback();
  StoreServerThread store(options);
  CHECK_FALSE(servedRaw(store.port()));  // loopback is exempt, but not for an unknown user
  hello(store.port(), kToken)->set("k", "v");
}

TEST_CASE("out of descriptors to ask the kernel, the client gets a busy notice", "[unit]") {
  auto options = server(Others::kRefuse);
  options.peerOwners = std::make_shared<FailingOwners>(EMFILE);
  StoreServerThread store(options);
  test::RawSocket sock(store.port());
  const std::string notice = sock.recvUntilClosed(10s);
  CHECK_THAT(notice, Catch::Matchers::StartsWith("DDPRBUSY local-store: out of file descriptors "
                                                 "(RLIMIT_NOFILE ") &&
                         Catch::Matchers::Contains("to tell which user owns this local connection"));
  CHECK(store.stats().outOfDescriptors == 1);
}

TEST_CASE("other local users: refused, let in by trustedUids, or asked for the token", "[unit]") {
  if (!isRoot()) return;
  SECTION("kAuthenticate without a token refuses them, naming the way in") {
    LogCapture log;
    StoreServerThread store(server(Others::kAuthenticate));
    CHECK(foreign(store.port(), "nobody", "end-jobs") == 10);
    CHECK(foreign(store.port(), "", "end-jobs") == 0);
    CHECK_THAT(log.text(), Catch::Matchers::Contains("a local process of another user (uid 65534; "
                                                     "this store serves uid 0 only: see "
                                                     "--allow-users"));
  }
  SECTION("trustedUids serves that user as this one") {
    auto options = server(Others::kAuthenticate);
    options.trustedUids = {65534};
    StoreServerThread store(options);
    CHECK(foreign(store.port(), "nobody", "end-jobs") == 0);
  }
  SECTION("kAuthenticate with a token: the token lets them in, an exempt address does not") {
    auto options = server(Others::kAuthenticate, kToken);
    options.allowUnauthenticated = AddressAllowlist::loopback();
    StoreServerThread store(options);
    CHECK(foreign(store.port(), "nobody", "end-jobs") == 10);
    CHECK(foreign(store.port(), "nobody", "end-jobs", kToken) == 0);
    CHECK(foreign(store.port(), "", "end-jobs") == 0);  // this user: exempt by address
  }
  SECTION("kServe judges them by address only (torch's TCPStore)") {
    StoreServerThread store(server(Others::kServe));
    CHECK(foreign(store.port(), "nobody", "end-jobs") == 0);
  }
}

TEST_CASE("a connection that does not present the token in time is closed", "[unit]") {
  auto options = server(Others::kAuthenticate, kToken);
  options.helloTimeout = 300ms;
  LogCapture log;
  StoreServerThread store(options);
  test::RawSocket idle(store.port());
  auto agent = hello(store.port(), kToken);
  CHECK(idle.closedByPeer(10s));
  agent->set("k", "v");  // the authenticated one stays
  CHECK(agent->get("k") == "v");
  CHECK_THAT(log.text(), Catch::Matchers::Contains("no HELLO with the token within 300 ms "
                                                   "(--hello-timeout)"));
  CHECK(store.stats().unauthenticatedClosed == 1);
}

TEST_CASE("unauthenticated connections are capped per peer and in all, oldest closed first",
          "[unit]") {
  auto options = server(Others::kAuthenticate, kToken);
  options.helloTimeout = 0ms;
  SECTION("per peer") { options.maxUnauthenticatedPerPeer = 3; }
  SECTION("in all") { options.maxUnauthenticated = 3; }
  StoreServerThread store(options);
  std::vector<std::unique_ptr<test::RawSocket>> idle;
  for (int i = 0; i < 6; ++i) {
    idle.push_back(std::make_unique<test::RawSocket>(store.port()));
    // The server registered it: a round trip (VALIDATE + PING is served before the token).
    std::string bytes;
    wire::Request validate;
    validate.op = wire::Op::kValidate;
    wire::encodeRequest(bytes, wire::Dialect::kV2, validate);
    wire::Request ping;
    ping.op = wire::Op::kPing;
    ping.nonce = 7;
    wire::encodeRequest(bytes, wire::Dialect::kV2, ping);
    idle.back()->send(bytes);
    REQUIRE(idle.back()->recv(4, 10s).size() == 4);
  }
  for (int i = 0; i < 3; ++i) CHECK(idle[i]->closedByPeer(10s));  // the three oldest
  CHECK(store.stats().unauthenticatedOpen == 3);
  CHECK(store.stats().unauthenticatedClosed == 3);
  // A client with the token still gets in (and closes the oldest stranger to do so).
  auto agent = hello(store.port(), kToken);
  agent->set("k", "v");
  CHECK(store.stats().unauthenticatedOpen == 2);
}
