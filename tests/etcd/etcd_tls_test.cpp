// EtcdStore over https: a real etcd 3.4 started with TLS and client-certificate authentication by
// scripts/ci/start_etcd.sh (ETCD_CI_TLS_*), certificates made at test time by
// tests/rendezvous/make_test_certs.sh. Requests and watches (get/wait) run over TLS; a missing CA,
// a wrong CA, a missing client certificate and plain http are each refused with a clear error.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <future>
#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/store/etcd_store.hpp"
#include "tests/etcd/etcd_instance.hpp"
#include "tests/error_of.hpp"

using namespace std::chrono_literals;

using ddp::testing::errorOf;

namespace {

std::string makeCerts() {
  const std::string dir = ddp::test::requiredEnv("DDP_TEST_TMP") + "/certs";
  const std::string cmd =
      ddp::test::requiredEnv("DDP_SOURCE_DIR") + "/tests/rendezvous/make_test_certs.sh " + dir;
  REQUIRE(std::system(cmd.c_str()) == 0);
  return dir;
}

// An etcd serving https on its client port, wanting client certificates signed by the test CA.
struct TlsEtcd {
  TlsEtcd() : certs(makeCerts()) {
    ::setenv("ETCD_CI_TLS_CERT", (certs + "/server.pem").c_str(), 1);
    ::setenv("ETCD_CI_TLS_KEY", (certs + "/server.key").c_str(), 1);
    ::setenv("ETCD_CI_TLS_CLIENT_CA", (certs + "/ca.pem").c_str(), 1);
    ::setenv("ETCD_CI_TLS_CLIENT_CERT", (certs + "/client.pem").c_str(), 1);
    ::setenv("ETCD_CI_TLS_CLIENT_KEY", (certs + "/client.key").c_str(), 1);
    etcd = std::make_unique<ddp::test::EtcdInstance>();
  }

  ddp::EtcdStoreOptions options(bool https = true) const {
    ddp::EtcdStoreOptions o;
    o.endpoints = {ddp::parseEndpoint(etcd->endpoint(), std::nullopt)};
    o.https = https;
    o.prefix = "/ddp-tls/";
    o.timeout = 10s;
    o.retryTimeout = 1500ms;
    o.requestTimeout = 1s;
    o.tls.caFile = certs + "/ca.pem";
    o.tls.certFile = certs + "/client.pem";
    o.tls.keyFile = certs + "/client.key";
    return o;
  }

  std::string certs;
  std::unique_ptr<ddp::test::EtcdInstance> etcd;
};

}  // namespace

TEST_CASE("EtcdStore over https: requests and watches", "[etcd]") {
  TlsEtcd tls;
  ddp::EtcdStore store(tls.options());
  store.set("k", "v");
  CHECK(store.get("k") == "v");
  CHECK(store.add("n", 3) == 3);
  CHECK(store.compareSet("k", "v", "w") == "w");
  // A wait that sleeps on a watch stream (TLS too) until another client sets the key.
  auto waiter = std::async(std::launch::async, [&tls] {
    ddp::EtcdStore other(tls.options());
    other.wait({"later"}, 10s);
    return other.get("later");
  });
  CHECK_THROWS_AS(store.wait({"never"}, 100ms), ddp::TimeoutError);
  store.set("later", "arrived");
  CHECK(waiter.get() == "arrived");
}

TEST_CASE("EtcdStore over https refuses what it cannot trust", "[etcd]") {
  TlsEtcd tls;
  SECTION("an https endpoint without a CA file") {
    auto o = tls.options();
    o.tls = {};
    CHECK_THAT(errorOf<ddp::ConfigError>([&] { ddp::EtcdStore made(o); }), Catch::Matchers::Contains("tls_ca"));
  }
  SECTION("a server certificate from another CA") {
    auto o = tls.options();
    o.tls.caFile = tls.certs + "/other-ca.pem";
    CHECK_THAT(errorOf<ddp::NetworkError>([&] { ddp::EtcdStore made(o); }), Catch::Matchers::Contains("certificate verify failed"));
  }
  SECTION("no client certificate for an etcd with --client-cert-auth") {
    auto o = tls.options();
    o.tls.certFile.clear();
    o.tls.keyFile.clear();
    CHECK_THROWS_AS(ddp::EtcdStore(o), ddp::NetworkError);
  }
  SECTION("plain http to an https etcd") {
    auto o = tls.options(/*https=*/false);
    CHECK_THROWS_AS(ddp::EtcdStore(o), ddp::NetworkError);
  }
}
