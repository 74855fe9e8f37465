// Unit tests of ddprun's wire extension (HELLO, ON_CLOSE, ON_CLOSE_CLEAR, REQUEST_ID) and the busy
// notice: exact bytes, v2-only decoding, split input and limits, replies.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/wire/wire_codec.hpp"
#include "tests/rendezvous/wire_test_support.hpp"

using namespace ddp;
using namespace ddp::wire;
using namespace ddp::wire::testing;

// ---- ddprun's extension (HELLO, ON_CLOSE, ON_CLOSE_CLEAR) -------------------------------------

TEST_CASE("extension requests: exact bytes, decoded after VALIDATE", "[wire][extension]") {
  std::vector<std::string_view> fields{"client", "ddprun"};
  Request hello;
  hello.op = Op::kHello;
  hello.version = kExtensionVersion;
  hello.capabilities = kCapOnClose;
  hello.keys = fields;
  std::string out;
  encodeRequest(out, Dialect::kV2, hello);
  const auto helloBytes = hex("f0 01000000 0100000000000000 0100000000000000 "
                              "0600000000000000 636c69656e74 0600000000000000 64647072756e");
  CHECK(out == helloBytes);

  Request arm;
  arm.op = Op::kOnClose;
  arm.key = "k";
  arm.value = "";
  arm.desired = "v";
  out.clear();
  encodeRequest(out, Dialect::kV2, arm);
  const auto armBytes = hex("f1 0100000000000000 6b 0000000000000000 0100000000000000 76");
  CHECK(out == armBytes);

  Request clearAll;
  clearAll.op = Op::kOnCloseClear;
  out.clear();
  encodeRequest(out, Dialect::kV2, clearAll);
  CHECK(out == hex("f2 0000000000000000"));

  RequestDecoder d;
  REQUIRE(std::get<Request>(d.decode(hex("00 cef7853c"))).op == Op::kValidate);
  auto h = decodeOne(d, helloBytes);
  CHECK(h.op == Op::kHello);
  CHECK(keysOf(h) == std::vector<std::string>{"client", "ddprun"});
  auto decoded = std::get<Request>(d.decode(helloBytes));
  CHECK(decoded.version == kExtensionVersion);
  CHECK(decoded.capabilities == kCapOnClose);
  auto a = decodeOne(d, armBytes);
  CHECK(a.op == Op::kOnClose);
  CHECK(a.key == "k");
  CHECK(a.value.empty());
  CHECK(a.desired == "v");
  auto c = decodeOne(d, hex("f2 0200000000000000 0100000000000000 61 0100000000000000 62"));
  CHECK(c.op == Op::kOnCloseClear);
  CHECK(keysOf(c) == std::vector<std::string>{"a", "b"});
  CHECK(keysOf(decodeOne(d, hex("f2 0000000000000000"))).empty());
  const auto tagBytes = hex("f3 0201000000000000 0700000000000000");
  auto tagResult = d.decode(tagBytes);
  REQUIRE(std::holds_alternative<Request>(tagResult));
  const auto& t = std::get<Request>(tagResult);
  CHECK(t.op == Op::kRequestId);
  CHECK(t.client == 0x0102);
  CHECK(t.sequence == 7);
  CHECK(t.size == tagBytes.size());
  std::string tagged;
  encodeRequest(tagged, Dialect::kV2, t);
  CHECK(tagged == tagBytes);
  CHECK(std::holds_alternative<Malformed>(d.decode(hex("f4"))));  // not (yet) an extension op
}

TEST_CASE("extension opcodes exist only in v2: torch clients never send them",
          "[wire][extension]") {
  for (auto legacy : {LegacyDialect::kAuto, LegacyDialect::kTorch113, LegacyDialect::kTorch21}) {
    RequestDecoder d({}, legacy);
    CHECK(std::holds_alternative<Malformed>(d.decode(hex("f1 0100000000000000 6b"))));
  }
  for (auto op : {Op::kHello, Op::kOnClose, Op::kOnCloseClear}) {
    CHECK_FALSE(opcodeFor(Dialect::kV1a, op));
    CHECK_FALSE(opcodeFor(Dialect::kV1b, op));
    REQUIRE(opcodeFor(Dialect::kV2, op));
    CHECK(*opcodeFor(Dialect::kV2, op) >= 0xF0);  // far from torch's 0..18
  }
  Request hello;
  hello.op = Op::kHello;
  std::string out;
  CHECK_THROWS_AS(encodeRequest(out, Dialect::kV1a, hello), ProtocolError);
}

TEST_CASE("extension requests: split input needs more, limits make it malformed",
          "[wire][extension]") {
  const auto arm = hex("f1 0100000000000000 6b 0000000000000000 0100000000000000 76");
  for (std::size_t cut = 1; cut < arm.size(); ++cut) {
    RequestDecoder d;
    REQUIRE(std::holds_alternative<Request>(d.decode(hex("00 cef7853c"))));
    auto result = d.decode(std::string_view(arm).substr(0, cut));
    REQUIRE(std::holds_alternative<NeedMore>(result));
    CHECK(std::get<NeedMore>(result).atLeast > cut);
  }
  WireLimits limits;
  limits.maxKeyBytes = 4;
  limits.maxValueBytes = 8;
  limits.maxKeysPerRequest = 2;
  limits.maxHelloFields = 1;
  auto malformed = [&](const std::string& bytes) {
    RequestDecoder d(limits);
    REQUIRE(std::holds_alternative<Request>(d.decode(hex("00 cef7853c"))));
    auto result = d.decode(bytes);
    if (auto* m = std::get_if<Malformed>(&result)) {
      INFO(m->reason);
      return true;
    }
    return false;
  };
  CHECK(malformed(hex("f0 01000000 0000000000000000 0200000000000000")));  // 2 fields > 1
  CHECK(malformed(hex("f0 01000000 0000000000000000 ffffffffffffffff")));  // huge count
  CHECK(malformed(hex("f0 01000000 0000000000000000 0100000000000000 0500000000000000")));
  CHECK(malformed(hex("f1 0500000000000000")));                           // key 5 > 4
  CHECK(malformed(hex("f1 0100000000000000 6b 0900000000000000")));       // expected 9 > 8
  CHECK(malformed(hex("f1 0100000000000000 6b 0000000000000000 0900000000000000")));
  CHECK(malformed(hex("f2 0300000000000000")));                           // 3 keys > 2
  CHECK_FALSE(malformed(hex("f0 01000000 0000000000000000 0100000000000000 "
                            "0400000000000000 61626364 0400000000000000 61626364")));
}

TEST_CASE("extension replies: exact bytes and incremental decoding", "[wire][extension]") {
  std::vector<std::string_view> fields{"server", "x"};
  std::string out;
  encodeHelloReply(out, kHelloAccepted, kCapOnClose, fields);
  const auto helloReply = hex("00 01000000 0100000000000000 0100000000000000 "
                              "0600000000000000 736572766572 0100000000000000 78");
  CHECK(out == helloReply);
  for (std::size_t cut = 0; cut < helloReply.size(); ++cut) {
    CHECK(std::holds_alternative<NeedMore>(decodeReply(helloReply.substr(0, cut), Op::kHello)));
  }
  auto reply = std::get<Reply>(decodeReply(helloReply, Op::kHello));
  CHECK(reply.status == kHelloAccepted);
  CHECK(reply.version == kExtensionVersion);
  CHECK(reply.capabilities == kCapOnClose);
  CHECK(std::vector<std::string>(reply.values.begin(), reply.values.end()) ==
        std::vector<std::string>{"server", "x"});
  CHECK(reply.size == helloReply.size());
  CHECK(std::holds_alternative<Malformed>(
      decodeReply(hex("00 01000000 0000000000000000 ffffffffffffffff"), Op::kHello)));
  CHECK(std::get<Reply>(decodeReply(hex("0200000000000000"), Op::kOnClose)).integer == 2);
  CHECK(std::get<Reply>(decodeReply(hex("ffffffffffffffff"), Op::kOnClose)).integer ==
        kOnCloseRefused);
  CHECK(std::get<Reply>(decodeReply(hex("0100000000000000"), Op::kOnCloseClear)).integer == 1);
}

// ---- Busy notice -------------------------------------------------------------------------------

TEST_CASE("busy notice: exact bytes, told apart from a reply as it arrives", "[wire][extension]") {
  std::string out;
  encodeBusyNotice(out, "ddprund: out of file descriptors (RLIMIT_NOFILE 64)\n\x01");
  CHECK(out == "DDPRBUSY ddprund: out of file descriptors (RLIMIT_NOFILE 64)??\n");
  for (std::size_t n = 0; n < out.size(); ++n) {  // every prefix: read more
    CHECK(decodeBusyNotice(std::string_view(out).substr(0, n)).kind ==
          BusyNotice::Kind::kPartial);
  }
  const BusyNotice whole = decodeBusyNotice(out + "trailing");
  CHECK(whole.kind == BusyNotice::Kind::kNotice);
  CHECK(whole.reason == "ddprund: out of file descriptors (RLIMIT_NOFILE 64)??");
  // A PING echo of any pid, or a v1 first reply, is no notice.
  std::string echo;
  encodePingReply(echo, 4194304);
  CHECK(decodeBusyNotice(echo).kind == BusyNotice::Kind::kNone);
  CHECK(decodeBusyNotice("DDPX").kind == BusyNotice::Kind::kNone);
  CHECK(decodeBusyNotice("DDPRBUSz").kind == BusyNotice::Kind::kNone);
}

TEST_CASE("busy notice: a reason is cut at the limit, and so is a notice without its newline",
          "[wire][extension]") {
  std::string out;
  encodeBusyNotice(out, std::string(500, 'x'));
  CHECK(out.size() == kBusyMagic.size() + 1 + kBusyReasonMax + 1);
  const std::string endless = std::string(kBusyMagic) + " " + std::string(1000, 'y');
  const BusyNotice cut = decodeBusyNotice(endless);
  CHECK(cut.kind == BusyNotice::Kind::kNotice);
  CHECK(cut.reason == std::string(kBusyReasonMax, 'y'));
}
