// Unit tests of etcdStoreOptionsFor: --rdzv-endpoint / --rdzv-conf for the etcd backend. No etcd.
#include <catch2/catch.hpp>

#include "rendezvous/error.hpp"
#include "rendezvous/etcd_store.hpp"

using ddp::etcdStoreOptionsFor;
using Conf = std::map<std::string, std::string>;
using Strings = std::vector<std::string>;
using namespace std::chrono_literals;

TEST_CASE("endpoints: default port 2379, several for failover", "[etcd_options]") {
  CHECK(etcdStoreOptionsFor("head", {}).endpoints == Strings{"http://head:2379"});
  CHECK(etcdStoreOptionsFor("head:23790", {}).endpoints == Strings{"http://head:23790"});
  CHECK(etcdStoreOptionsFor("a:1,b,http://c:3", {}).endpoints ==
        Strings{"http://a:1", "http://b:2379", "http://c:3"});
  CHECK(etcdStoreOptionsFor("[::1]", {}).endpoints == Strings{"http://[::1]:2379"});
  CHECK(etcdStoreOptionsFor("[::1]:5", {}).endpoints == Strings{"http://[::1]:5"});
  CHECK_THROWS_AS(etcdStoreOptionsFor("", {}), ddp::ConfigError);
  CHECK_THROWS_AS(etcdStoreOptionsFor("head:port", {}), ddp::ConfigError);
  CHECK_THROWS_AS(etcdStoreOptionsFor("head:70000", {}), ddp::ConfigError);
}

TEST_CASE("--rdzv-conf keys", "[etcd_options]") {
  ddp::EtcdStoreOptions o = etcdStoreOptionsFor(
      "h", Conf{{"protocol", "http"}, {"etcd_prefix", "/job7"}, {"request_timeout", "1.5"},
                {"retry_timeout", "60"}, {"last_call_timeout", "30"}});
  CHECK(o.prefix == "/job7/");
  CHECK(o.requestTimeout == 1500ms);
  CHECK(o.retryTimeout == 60s);
  CHECK(etcdStoreOptionsFor("h", {}).prefix == "/ddp/");
  CHECK_THROWS_WITH(etcdStoreOptionsFor("h", Conf{{"protocol", "https"}}),
                    Catch::Contains("https is not supported"));
  CHECK_THROWS_WITH(etcdStoreOptionsFor("https://h:1", {}), Catch::Contains("https is not supported"));
  CHECK_THROWS_AS(etcdStoreOptionsFor("h", Conf{{"protocol", "grpc"}}), ddp::ConfigError);
  CHECK_THROWS_WITH(etcdStoreOptionsFor("h", Conf{{"request_timeout", "soon"}}),
                    Catch::Contains("request_timeout=soon"));
}
