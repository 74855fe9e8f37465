// TLS between TcpStoreClient and StoreServer (ddprun <-> ddprund): certificates made at test time
// by make_test_certs.sh; the server's certificate checked against the CA and the host name;
// mutual TLS when the server has a CA; plain connections only from addresses allowed without a
// token; a token over TLS.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <memory>
#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/security/address_allowlist.hpp"
#include "rendezvous/server/store_server.hpp"
#include "rendezvous/store/tcp_store_client.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/raw_socket.hpp"
#include "tests/error_of.hpp"

using namespace ddp;
using namespace std::chrono_literals;

using ddp::testing::errorOf;

namespace {

// The certificate directory, made once per test process.
const std::string& certs() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("DDP_TEST_TMP");
    const char* src = std::getenv("DDP_SOURCE_DIR");
    REQUIRE(tmp != nullptr);
    REQUIRE(src != nullptr);
    const std::string out = std::string(tmp) + "/certs";
    const std::string cmd = std::string(src) + "/tests/rendezvous/make_test_certs.sh " + out;
    REQUIRE(std::system(cmd.c_str()) == 0);
    return out;
  }();
  return dir;
}

std::string pem(const std::string& name) { return certs() + "/" + name; }

StoreServerOptions tlsServer(bool mutual = false, const std::string& cert = "server") {
  StoreServerOptions o;
  o.host = "127.0.0.1";
  o.name = "tls-store";
  o.tls.certFile = pem(cert + ".pem");
  o.tls.keyFile = pem(cert + ".key");
  if (mutual) o.tls.caFile = pem("ca.pem");
  return o;
}

// Budgets: a connect that must fail waits its whole connectTimeout, so keep that short where a
// failure is expected (refused()); one that must succeed gets room for a busy machine.
TcpStoreClientOptions tlsClient(uint16_t port, const std::string& ca = "ca.pem", bool withCert = false) {
  TcpStoreClientOptions o;
  o.endpoint.port = port;
  o.connectTimeout = 10s;
  o.timeout = 5s;
  if (!ca.empty()) o.tls.caFile = pem(ca);
  if (withCert) {
    o.tls.certFile = pem("client.pem");
    o.tls.keyFile = pem("client.key");
  }
  return o;
}

TcpStoreClientOptions refused(TcpStoreClientOptions o) {
  o.connectTimeout = 1500ms;
  return o;
}

}  // namespace

TEST_CASE("a TLS client works against a TLS server: requests, waits, HELLO", "[unit]") {
  StoreServerThread store(tlsServer());
  auto a = connectTcpStore(tlsClient(store.port()), wire::kCapOnClose, {{"client", "test"}});
  CHECK(a->onCloseSupported());
  TcpStoreClient b(tlsClient(store.port()));
  a->set("k", std::string(100000, 'x'));  // several TLS records
  CHECK(b.get("k") == std::string(100000, 'x'));
  CHECK(b.add("n", 5) == 5);
  CHECK_THROWS_AS(b.wait({"missing"}, 50ms), TimeoutError);  // CANCEL_WAIT over TLS
  a->set("missing", "now");
  b.wait({"missing"}, 5s);
  CHECK(b.compareSet("n", "5", "6") == "6");
}

TEST_CASE("a plain client is refused by a TLS server", "[unit]") {
  StoreServerThread store(tlsServer());
  CHECK_THAT(errorOf<TimeoutError>([&] { TcpStoreClient made(refused(tlsClient(store.port(), ""))); }), Catch::Matchers::Contains("no PING echo"));
  test::RawSocket raw(store.port());
  raw.send(std::string(1, '\0') + "\xce\xf7\x85\x3c" + "\x0d\x01\x02\x03\x04");
  CHECK(raw.closedByPeer(5s));
}

TEST_CASE("plain connections to a TLS server are served from allowUnauthenticated", "[unit]") {
  auto options = tlsServer();
  options.allowUnauthenticated = AddressAllowlist::parse("127.0.0.2");
  StoreServerThread store(options);
  test::RawSocket plain(store.port(), "127.0.0.1", "127.0.0.2");
  plain.send(std::string(1, '\0') + "\xce\xf7\x85\x3c" + "\x0d\x01\x02\x03\x04");
  CHECK(plain.recv(4, 5s) == "\x01\x02\x03\x04");
  TcpStoreClient tls(tlsClient(store.port()));  // and TLS from everywhere
  CHECK(tls.numKeys() == 0);
}

TEST_CASE("the client refuses a server certificate from another CA or for another name", "[unit]") {
  SECTION("another CA") {
    StoreServerThread store(tlsServer());
    CHECK_THAT(errorOf<TimeoutError>([&] { TcpStoreClient made(refused(tlsClient(store.port(), "other-ca.pem"))); }), Catch::Matchers::Contains("the server's certificate was refused"));
  }
  SECTION("another name") {
    StoreServerThread store(tlsServer(false, "wrongname"));
    CHECK_THAT(errorOf<TimeoutError>([&] { TcpStoreClient made(refused(tlsClient(store.port()))); }), Catch::Matchers::Contains("the server's certificate was refused") &&
                             Catch::Matchers::Contains("mismatch"));
  }
  SECTION("the right name by DNS") {
    auto options = tlsServer();
    options.host = "::";
    StoreServerThread store(options);
    auto client = tlsClient(store.port());
    client.endpoint.host = "localhost";
    CHECK(TcpStoreClient(client).numKeys() == 0);
  }
}

TEST_CASE("mutual TLS: a server with a CA wants a client certificate signed by it", "[unit]") {
  StoreServerThread store(tlsServer(true));
  CHECK_THROWS_AS(TcpStoreClient(refused(tlsClient(store.port()))), TimeoutError);
  TcpStoreClient agent(tlsClient(store.port(), "ca.pem", true));
  agent.set("k", "v");
  CHECK(agent.get("k") == "v");
}

TEST_CASE("a token travels inside TLS", "[unit]") {
  auto options = tlsServer(true);
  options.token = "tls-token";
  StoreServerThread store(options);
  auto good = tlsClient(store.port(), "ca.pem", true);
  good.token = "tls-token";
  connectTcpStore(good, 0, {})->set("k", "v");
  auto bad = good;
  bad.token = "other";
  CHECK_THAT(errorOf<ConfigError>([&] { connectTcpStore(bad, 0, {}); }), Catch::Matchers::Contains("wrong token"));
}

TEST_CASE("unusable TLS files are config errors naming the file", "[unit]") {
  auto options = tlsServer();
  options.tls.keyFile = pem("client.key");  // not the certificate's key
  CHECK_THAT(errorOf<ConfigError>([&] { StoreServerThread made(options); }), Catch::Matchers::Contains("client.key") && Catch::Matchers::Contains("mismatch"));
  options.tls.certFile = certs() + "/missing.pem";
  CHECK_THAT(errorOf<ConfigError>([&] { StoreServerThread made(options); }), Catch::Matchers::Contains("missing.pem"));
  auto client = tlsClient(1, "missing-ca.pem");
  CHECK_THAT(errorOf<ConfigError>([&] { TcpStoreClient made(client); }), Catch::Matchers::Contains("missing-ca.pem"));
}
