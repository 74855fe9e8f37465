// Unit tests of the pure TCPStore wire codec, using byte captures of
// real torch clients for each dialect (the layout: rendezvous/wire/wire_codec.hpp).
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/wire_test_support.hpp"

using namespace ddp;
using namespace ddp::wire;
using namespace ddp::wire::testing;

TEST_CASE("v1a captured requests decode", "[wire]") {
  RequestDecoder d;
  auto set = decodeOne(d, hex("00 0300000000000000 2f6b31 0200000000000000 7631"));
  CHECK(d.dialect() == Dialect::kV1);
  CHECK(set.op == Op::kSet);
  CHECK(set.key == "/k1");
  CHECK(set.value == "v1");

  auto cas = decodeOne(
      d, hex("01 0400000000000000 2f636173 0000000000000000 0500000000000000 6669727374"));
  CHECK(cas.op == Op::kCompareSet);
  CHECK(cas.key == "/cas");
  CHECK(cas.value.empty());
  CHECK(cas.desired == "first");

  auto get = decodeOne(d, hex("02 0300000000000000 2f6b31"));
  CHECK(get.op == Op::kGet);
  CHECK(get.key == "/k1");

  auto add = decodeOne(d, hex("03 0400000000000000 2f636e74 f6ffffffffffffff"));
  CHECK(add.op == Op::kAdd);
  CHECK(add.key == "/cnt");
  CHECK(add.number == -10);

  auto init = decodeOne(d, hex("03 0500000000000000 696e69742f 0100000000000000"));
  CHECK(init.key == "init/");
  CHECK(init.number == 1);

  auto check = decodeOne(d, hex("04 0200000000000000 0200000000000000 2f61 0300000000000000 2f7a7a"));
  CHECK(check.op == Op::kCheck);
  CHECK(keysOf(check) == std::vector<std::string>{"/a", "/zz"});

  auto wait = decodeOne(d, hex("05 0100000000000000 0300000000000000 2f6b31"));
  CHECK(wait.op == Op::kWait);
  CHECK(keysOf(wait) == std::vector<std::string>{"/k1"});

  auto numKeys = decodeOne(d, hex("06"));
  CHECK(numKeys.op == Op::kGetNumKeys);
  CHECK(numKeys.keys.empty());  // not the previous WAIT's keys
  CHECK(d.dialect() == Dialect::kV1);  // still undecided: 0..6 are shared by v1a and v1b
}

TEST_CASE("v1 opcode 8 alone is ambiguous until resolved as v1a DELETE_KEY", "[wire]") {
  RequestDecoder d;
  const auto del = hex("08 0300000000000000 2f6b31");
  auto first = d.decode(del);
  REQUIRE(std::holds_alternative<NeedMore>(first));
  CHECK(std::get<NeedMore>(first).ambiguous);
  d.resolveAmbiguityAsV1a();
  CHECK(d.dialect() == Dialect::kV1a);
  auto r = decodeOne(d, del);
  CHECK(r.op == Op::kDeleteKey);
  CHECK(r.key == "/k1");
  // Pinned v1a: opcode 7 is WATCH_KEY, 9 is unknown.
  CHECK(decodeOne(d, hex("07 0300000000000000 2f776b")).op == Op::kWatchKey);
  CHECK(std::holds_alternative<Malformed>(d.decode(hex("09 0000000000000000"))));
}

TEST_CASE("v1 opcode 8 with data after the key is a v1b APPEND", "[wire]") {
  RequestDecoder d;
  auto r = decodeOne(d, hex("08 0200000000000000 2f6b 0100000000000000 77"));
  CHECK(r.op == Op::kAppend);
  CHECK(r.key == "/k");
  CHECK(r.value == "w");
  CHECK(d.dialect() == Dialect::kV1b);
  auto partial = d.decode(hex("08 0300000000000000 2f6b31"));  // pinned: APPEND, no ambiguity
  REQUIRE(std::holds_alternative<NeedMore>(partial));
  CHECK_FALSE(std::get<NeedMore>(partial).ambiguous);
}

TEST_CASE("v1b-only opcodes pin the connection to v1b", "[wire]") {
  RequestDecoder d;
  auto mget = decodeOne(d, hex("09 0100000000000000 0200000000000000 2f6b"));
  CHECK(mget.op == Op::kMultiGet);
  CHECK(d.dialect() == Dialect::kV1b);
  CHECK(decodeOne(d, hex("07 0200000000000000 2f6b")).op == Op::kDeleteKey);
  CHECK(decodeOne(d, hex("0b")).op == Op::kCancelWait);
  auto mset = decodeOne(d, hex("0a 0100000000000000 0200000000000000 2f61 0100000000000000 31"));
  CHECK(mset.op == Op::kMultiSet);
  CHECK(keysOf(mset) == std::vector<std::string>{"/a", "1"});
  CHECK(std::holds_alternative<Malformed>(d.decode(hex("0c"))));
}

TEST_CASE("--legacy-dialect pins v1 traffic up front", "[wire]") {
  RequestDecoder torch113({}, LegacyDialect::kTorch113);
  CHECK(decodeOne(torch113, hex("07 0300000000000000 2f776b")).op == Op::kWatchKey);
  CHECK(torch113.dialect() == Dialect::kV1a);
  CHECK(decodeOne(torch113, hex("08 0300000000000000 2f6b31")).op == Op::kDeleteKey);

  RequestDecoder torch21({}, LegacyDialect::kTorch21);
  CHECK(decodeOne(torch21, hex("07 0300000000000000 2f6b31")).op == Op::kDeleteKey);
  CHECK(decodeOne(torch21, hex("08 0200000000000000 2f6b 0100000000000000 77")).op ==
        Op::kAppend);
  // A v2 client is still recognised on a pinned-legacy server.
  RequestDecoder v2({}, LegacyDialect::kTorch113);
  CHECK(decodeOne(v2, hex("00 cef7853c")).op == Op::kValidate);
  CHECK(v2.dialect() == Dialect::kV2);
}

TEST_CASE("v2 requests decode after VALIDATE", "[wire]") {
  RequestDecoder d;
  CHECK(std::holds_alternative<NeedMore>(d.decode(hex("00"))));
  CHECK(std::holds_alternative<NeedMore>(d.decode(hex("00 cef7"))));
  CHECK(d.dialect() == Dialect::kUnknown);
  auto validate = decodeOne(d, hex("00 cef7853c"));
  CHECK(validate.op == Op::kValidate);
  CHECK(d.dialect() == Dialect::kV2);

  auto ping = decodeOne(d, hex("0d 8c590000"));
  CHECK(ping.op == Op::kPing);
  CHECK(ping.nonce == 0x598c);
  auto set = decodeOne(d, hex("01 0200000000000000 2f6b 0100000000000000 76"));
  CHECK(set.op == Op::kSet);
  CHECK(set.key == "/k");
  CHECK(decodeOne(d, hex("08 0300000000000000 2f6b31")).op == Op::kDeleteKey);
  CHECK(decodeOne(d, hex("09 0200000000000000 2f6b 0100000000000000 77")).op == Op::kAppend);
  auto mget = decodeOne(d, hex("0a 0300000000000000 0200000000000000 2f6b 0200000000000000 2f61 "
                               "0200000000000000 2f62"));
  CHECK(keysOf(mget) == std::vector<std::string>{"/k", "/a", "/b"});
  auto mset = decodeOne(d, hex("0b 0200000000000000 0200000000000000 2f61 0100000000000000 31 "
                               "0200000000000000 2f62 0200000000000000 3232"));
  CHECK(keysOf(mset) == std::vector<std::string>{"/a", "1", "/b", "22"});
  CHECK(decodeOne(d, hex("0c")).op == Op::kCancelWait);
  auto push = decodeOne(d, hex("0e 0200000000000000 2f71 0400000000000000 6974656d"));
  CHECK(push.op == Op::kQueuePush);
  CHECK(push.value == "item");
  CHECK(decodeOne(d, hex("0f 0200000000000000 2f71")).op == Op::kQueuePop);
  CHECK(decodeOne(d, hex("10 0200000000000000 2f71")).op == Op::kQueueLen);
  CHECK(decodeOne(d, hex("11")).op == Op::kListKeys);
  auto barrier = decodeOne(d, hex("12 0400000000000000 2f626172 0200000000000000"));
  CHECK(barrier.op == Op::kBarrier);
  CHECK(barrier.key == "/bar");
  CHECK(barrier.number == 2);
  CHECK(decodeOne(d, hex("07")).op == Op::kGetNumKeys);
  CHECK(std::holds_alternative<Malformed>(d.decode(hex("13"))));
  CHECK(std::holds_alternative<Malformed>(d.decode(hex("00 cef7853d"))));  // wrong magic later
}

TEST_CASE("a wrong VALIDATE magic makes the connection v1 (and trips the key limit)", "[wire]") {
  RequestDecoder d;
  auto result = d.decode(hex("00 cef7853d 00000000"));
  CHECK(d.dialect() == Dialect::kV1);
  REQUIRE(std::holds_alternative<Malformed>(result));
  CHECK_THAT(std::get<Malformed>(result).reason, Catch::Contains("exceeds the limit"));
}

TEST_CASE("split requests need more until complete; pipelined ones decode one by one", "[wire]") {
  const auto set = hex("00 0300000000000000 2f6b31 0200000000000000 7631");
  const auto get = hex("02 0300000000000000 2f6b31");
  for (std::size_t cut = 0; cut < set.size(); ++cut) {
    RequestDecoder d;
    auto result = d.decode(std::string_view(set).substr(0, cut));
    REQUIRE(std::holds_alternative<NeedMore>(result));
    CHECK(std::get<NeedMore>(result).atLeast > cut);
    CHECK(std::get<NeedMore>(result).atLeast <= set.size());
  }
  RequestDecoder d;
  const std::string both = set + get;
  auto first = std::get<Request>(d.decode(both));
  CHECK(first.op == Op::kSet);
  CHECK(first.size == set.size());
  auto second = std::get<Request>(d.decode(std::string_view(both).substr(first.size)));
  CHECK(second.op == Op::kGet);
  CHECK(second.size == get.size());
}

TEST_CASE("limits make input malformed", "[wire]") {
  WireLimits limits;
  limits.maxKeyBytes = 4;
  limits.maxValueBytes = 8;
  limits.maxKeysPerRequest = 2;
  limits.maxRequestBytes = 64;
  auto malformed = [&](const std::string& bytes) {
    RequestDecoder d(limits);
    return std::holds_alternative<Malformed>(d.decode(bytes));
  };
  CHECK(malformed(hex("00 0500000000000000")));                                  // key 5 > 4
  CHECK(malformed(hex("00 0100000000000000 61 0900000000000000")));             // value 9 > 8
  CHECK(malformed(hex("05 0300000000000000")));                                  // 3 keys > 2
  CHECK(malformed(hex("0a ffffffffffffffff")));                                  // huge count
  CHECK(malformed(hex("00 ffffffffffffffff")));                                  // huge key
  CHECK_FALSE(malformed(hex("00 0400000000000000 61626364 0800000000000000")));  // at limits
  CHECK(malformed(std::string(1, '\x0c')));                                      // v1 opcode 12
}

TEST_CASE("reply encoders produce the captured bytes", "[wire]") {
  std::string out;
  encodeValueReply(out, "first");
  CHECK(out == hex("0500000000000000 6669727374"));
  out.clear();
  encodeIntReply(out, -2);
  CHECK(out == hex("feffffffffffffff"));
  out.clear();
  encodeByteReply(out, kNotReady);
  encodePingReply(out, 0x598c);
  CHECK(out == hex("01 8c590000"));
}

TEST_CASE("request encoders produce the captured bytes and round-trip", "[wire]") {
  std::string out;
  Request set;
  set.op = Op::kSet;
  set.key = "/k1";
  set.value = "v1";
  encodeRequest(out, Dialect::kV1a, set);
  CHECK(out == hex("00 0300000000000000 2f6b31 0200000000000000 7631"));

  out.clear();
  Request validate;
  validate.op = Op::kValidate;
  encodeRequest(out, Dialect::kV2, validate);
  encodeRequest(out, Dialect::kV2, set);
  CHECK(out == hex("00 cef7853c 01 0300000000000000 2f6b31 0200000000000000 7631"));

  std::vector<std::string_view> keys{"/a", "1", "/b", "22"};
  Request mset;
  mset.op = Op::kMultiSet;
  mset.keys = keys;
  out.clear();
  encodeRequest(out, Dialect::kV2, mset);
  CHECK(out == hex("0b 0200000000000000 0200000000000000 2f61 0100000000000000 31 "
                   "0200000000000000 2f62 0200000000000000 3232"));

  Request cancel;
  cancel.op = Op::kCancelWait;
  CHECK_THROWS_AS(encodeRequest(out, Dialect::kV1a, cancel), ProtocolError);

  // Every op of every dialect survives encode -> decode.
  for (auto dialect : {Dialect::kV1a, Dialect::kV1b, Dialect::kV2}) {
    for (int i = 0; i <= static_cast<int>(Op::kRequestId); ++i) {
      Request r;
      r.op = static_cast<Op>(i);
      if (!opcodeFor(dialect, r.op)) continue;
      r.key = "/key";
      r.value = "value";
      r.desired = "desired";
      r.number = -7;
      r.nonce = 1234;
      std::vector<std::string_view> list{"/x", "y"};
      r.keys = list;
      std::string bytes;
      if (dialect == Dialect::kV2 && r.op != Op::kValidate) encodeRequest(bytes, dialect, validate);
      const std::size_t skip = bytes.size();
      encodeRequest(bytes, dialect, r);
      RequestDecoder d({}, dialect == Dialect::kV1a  ? LegacyDialect::kTorch113
                           : dialect == Dialect::kV1b ? LegacyDialect::kTorch21
                                                      : LegacyDialect::kAuto);
      if (skip > 0) REQUIRE(std::get<Request>(d.decode(bytes)).size == skip);
      auto decoded = d.decode(std::string_view(bytes).substr(skip));
      INFO(dialectName(dialect) << " " << opName(r.op));
      REQUIRE(std::holds_alternative<Request>(decoded));
      CHECK(std::get<Request>(decoded).op == r.op);
      CHECK(std::get<Request>(decoded).size == bytes.size() - skip);
    }
  }
}

TEST_CASE("replies decode, incrementally", "[wire]") {
  const auto qpop = hex("0100000000000000 0400000000000000 6974656d");
  for (std::size_t cut = 0; cut < qpop.size(); ++cut) {
    CHECK(std::holds_alternative<NeedMore>(decodeReply(qpop.substr(0, cut), Op::kQueuePop)));
  }
  auto pop = std::get<Reply>(decodeReply(qpop, Op::kQueuePop));
  CHECK(pop.integer == 1);
  REQUIRE(pop.values.size() == 1);
  CHECK(pop.values[0] == "item");
  CHECK(pop.size == qpop.size());
  CHECK(std::get<Reply>(decodeReply(hex("0000000000000000"), Op::kQueuePop)).values.empty());

  const auto mget = hex("0200000000000000 7677 0100000000000000 31 0200000000000000 3232");
  auto m = std::get<Reply>(decodeReply(mget, Op::kMultiGet, 3));
  CHECK(std::vector<std::string>(m.values.begin(), m.values.end()) ==
        std::vector<std::string>{"vw", "1", "22"});
  CHECK(std::get<Reply>(decodeReply(hex("feffffffffffffff"), Op::kAdd)).integer == -2);
  CHECK(std::get<Reply>(decodeReply(hex("8c590000"), Op::kPing)).nonce == 0x598c);
  CHECK(std::get<Reply>(decodeReply(hex("01"), Op::kCancelWait)).status == kWaitCanceled);
  CHECK(std::holds_alternative<Malformed>(decodeReply(hex("00"), Op::kSet)));
  CHECK(std::holds_alternative<Malformed>(decodeReply(hex("ffffffffffffffff"), Op::kGet)));
  auto list = std::get<Reply>(
      decodeReply(hex("0200000000000000 0200000000000000 2f61 0100000000000000 62"), Op::kListKeys));
  CHECK(list.values.size() == 2);
}

TEST_CASE("random bytes never crash the decoder", "[wire][fuzz]") {
  std::mt19937_64 rng(20261129);
  const std::vector<std::string> seeds = {
      hex("00 0300000000000000 2f6b31 0200000000000000 7631"),
      hex("00 cef7853c 0b 0200000000000000 0200000000000000 2f61 0100000000000000 31"),
      hex("05 0200000000000000 0200000000000000 2f61 0300000000000000 2f7a7a"),
      hex("08 0200000000000000 2f6b 0100000000000000 77"),
      hex("00 cef7853c f0 01000000 0100000000000000 0100000000000000 0100000000000000 63 "
          "0100000000000000 64"),
      hex("00 cef7853c f1 0100000000000000 6b 0000000000000000 0100000000000000 76"),
  };
  WireLimits limits;
  limits.maxKeyBytes = 64;
  limits.maxValueBytes = 256;
  limits.maxKeysPerRequest = 16;
  std::size_t requests = 0, malformed = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes;
    if (iter % 2 == 0) {
      bytes = seeds[rng() % seeds.size()];
      for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
        bytes[rng() % bytes.size()] = static_cast<char>(rng());
      }
    } else {
      bytes.resize(rng() % 80);
      for (auto& ch : bytes) ch = static_cast<char>(rng() % 4 == 0 ? rng() % 20 : rng());
    }
    RequestDecoder d(limits, static_cast<LegacyDialect>(rng() % 3));
    std::string_view rest = bytes;
    for (int guard = 0; guard < 100; ++guard) {
      auto result = d.decode(rest);
      if (auto* r = std::get_if<Request>(&result)) {
        REQUIRE(r->size > 0);
        REQUIRE(r->size <= rest.size());
        rest.remove_prefix(r->size);
        ++requests;
        continue;
      }
      if (auto* need = std::get_if<NeedMore>(&result)) {
        REQUIRE(need->atLeast > rest.size());
        if (need->ambiguous) {
          d.resolveAmbiguityAsV1a();
          continue;
        }
      } else {
        ++malformed;
      }
      break;
    }
    for (int i = 0; i <= static_cast<int>(Op::kRequestId); ++i) {
      (void)decodeReply(bytes, static_cast<Op>(i), rng() % 4, 256);
    }
  }
  CHECK(requests > 1000);
  CHECK(malformed > 1000);
}
