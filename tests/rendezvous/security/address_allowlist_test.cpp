// AddressAllowlist: the grammar of --allow / --allow-unauthenticated / store_allow, and matching
// (CIDR prefixes, IPv4-mapped IPv6 peers, the words any/loopback/local).
#include <catch2/catch.hpp>

#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/security/address_allowlist.hpp"
#include "tests/error_of.hpp"

using ddp::testing::errorOf;

namespace {

using ddp::AddressAllowlist;

boost::asio::ip::address ip(const std::string& text) { return boost::asio::ip::make_address(text); }

}  // namespace

TEST_CASE("an allowlist holds the blocks it was given and nothing else", "[unit]") {
  const auto list = AddressAllowlist::parse("10.1.0.0/16, 192.168.7.9;fd00::/8");
  CHECK(list.contains(ip("10.1.0.1")));
  CHECK(list.contains(ip("10.1.255.255")));
  CHECK_FALSE(list.contains(ip("10.2.0.1")));
  CHECK(list.contains(ip("192.168.7.9")));
  CHECK_FALSE(list.contains(ip("192.168.7.10")));
  CHECK(list.contains(ip("fd12::1")));
  CHECK_FALSE(list.contains(ip("fe80::1")));
  CHECK_FALSE(list.contains(ip("127.0.0.1")));
  CHECK(list.describe() == "10.1.0.0/16, 192.168.7.9/32, fd00::/8");
}

TEST_CASE("prefixes that do not end on a byte boundary match bit by bit", "[unit]") {
  const auto list = AddressAllowlist::parse("10.0.0.64/27");  // .64 .. .95
  CHECK_FALSE(list.contains(ip("10.0.0.63")));
  CHECK(list.contains(ip("10.0.0.64")));
  CHECK(list.contains(ip("10.0.0.95")));
  CHECK_FALSE(list.contains(ip("10.0.0.96")));
  CHECK(AddressAllowlist::parse("10.0.0.77/27").describe() == "10.0.0.64/27");  // host bits dropped
}

TEST_CASE("an IPv4 peer seen by a dual-stack listener matches its IPv4 block", "[unit]") {
  const auto list = AddressAllowlist::parse("127.0.0.1");
  CHECK(list.contains(ip("::ffff:127.0.0.1")));
  CHECK_FALSE(list.contains(ip("::ffff:127.0.0.2")));
  CHECK(AddressAllowlist::parse("::ffff:10.0.0.1").contains(ip("10.0.0.1")));
}

TEST_CASE("the words any, loopback and local", "[unit]") {
  const auto any = AddressAllowlist::parse("any");
  CHECK(any.isAny());
  CHECK(any.describe() == "any");
  CHECK(any.contains(ip("203.0.113.5")));
  CHECK(any.contains(ip("2001:db8::5")));
  const auto loopback = AddressAllowlist::parse("loopback");
  CHECK(loopback.contains(ip("127.3.4.5")));
  CHECK(loopback.contains(ip("::1")));
  CHECK_FALSE(loopback.contains(ip("10.0.0.1")));
  CHECK_FALSE(loopback.isAny());
  const auto local = AddressAllowlist::parse("local");
  CHECK(local.contains(ip("127.0.0.1")));
  CHECK_FALSE(local.contains(ip("203.0.113.5")));  // TEST-NET-3: no interface of ours
}

TEST_CASE("an empty allowlist matches nothing", "[unit]") {
  const auto none = AddressAllowlist::parse("");
  CHECK(none.empty());
  CHECK_FALSE(none.contains(ip("127.0.0.1")));
  CHECK(none.describe() == "none");
  AddressAllowlist grown;
  grown.add(ip("::ffff:10.9.8.7"));
  CHECK(grown.contains(ip("10.9.8.7")));
}

TEST_CASE("malformed entries are config errors naming the entry", "[unit]") {
  CHECK_THAT(errorOf<ddp::ConfigError>([&] { AddressAllowlist::parse("10.0.0.0/8,nonsense"); }), Catch::Matchers::Contains("'nonsense'"));
  CHECK_THAT(errorOf<ddp::ConfigError>([&] { AddressAllowlist::parse("10.0.0.0/33"); }), Catch::Matchers::Contains("0..32"));
  CHECK_THROWS_AS(AddressAllowlist::parse("10.0.0.0/"), ddp::ConfigError);
  CHECK_THROWS_AS(AddressAllowlist::parse("::1/129"), ddp::ConfigError);
  CHECK_THROWS_AS(AddressAllowlist::parse("10.0.0.0/8x"), ddp::ConfigError);
}
