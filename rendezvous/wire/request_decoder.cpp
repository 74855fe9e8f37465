// The server's side of the wire: RequestDecoder, which tells the dialect from the first bytes and
// decodes requests as they arrive, resuming a long key list where it stopped. The byte layout is
// wire_codec.hpp's; the client's encoder and reply decoder are client_codec.cpp.
#include "rendezvous/wire/wire_codec.hpp"

#include <cstring>

#include "rendezvous/wire/detail/wire_cursor.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp::wire {

namespace detail {

bool parseKeyList(Cursor& c, const WireLimits& limits, bool pairs, KeyList& list) {
  if (!list.resuming) {
    uint64_t n = 0;
    if (!c.scalar(n)) return false;
    if (n > limits.maxKeysPerRequest) {
      return c.fail(std::to_string(n) + " keys exceed the limit of " +
                    std::to_string(limits.maxKeysPerRequest) + " per request");
    }
    list.keys.clear();
    list.resuming = true;
    list.count = pairs ? 2 * n : n;
    list.next = c.pos();
  } else if (list.base != c.bytes().data()) {
    // The caller's buffer moved since the last call: re-point the views parsed so far.
    for (auto& key : list.keys) {
      key = c.bytes().substr(static_cast<std::size_t>(key.data() - list.base), key.size());
    }
  }
  list.base = c.bytes().data();
  c.seek(list.next);
  while (list.keys.size() < list.count) {
    const bool value = pairs && list.keys.size() % 2 == 1;
    std::string_view s;
    if (!c.str(s, value ? limits.maxValueBytes : limits.maxKeyBytes, value ? "value" : "key")) {
      return false;
    }
    list.keys.push_back(s);
    list.next = c.pos();
  }
  list.resuming = false;
  return true;
}

}  // namespace detail

namespace {

using detail::Cursor;
using detail::parseKeyList;

// Parses the arguments of `r.op` (the opcode byte is already consumed).
bool parseBody(Cursor& c, const WireLimits& limits, Request& r, detail::KeyList& keys) {
  const std::size_t maxKey = limits.maxKeyBytes;
  const std::size_t maxValue = limits.maxValueBytes;
  switch (r.op) {
    case Op::kValidate:
      if (!c.scalar(r.nonce)) return false;
      if (r.nonce != kValidateMagic) return c.fail("VALIDATE with a wrong magic number");
      return true;
    case Op::kPing:
      return c.scalar(r.nonce);
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      return c.str(r.key, maxKey, "key") && c.str(r.value, maxValue, "value");
    case Op::kCompareSet:
      return c.str(r.key, maxKey, "key") && c.str(r.value, maxValue, "expected value") &&
             c.str(r.desired, maxValue, "desired value");
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen:
      return c.str(r.key, maxKey, "key");
    case Op::kAdd:
    case Op::kBarrier:
      return c.str(r.key, maxKey, "key") && c.scalar(r.number);
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
      return parseKeyList(c, limits, false, keys);
    case Op::kMultiSet:
      return parseKeyList(c, limits, true, keys);
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys:
      return true;
    case Op::kHello:
    case Op::kOnClose:
    case Op::kOnCloseClear:
    case Op::kRequestId:
      return detail::parseExtensionBody(c, limits, r, keys);
  }
  return c.fail("unhandled op");
}

DecodeResult finish(Cursor& c) {
  if (c.malformed()) return Malformed{std::move(c.reason())};
  return NeedMore{c.needed(), false};
}

}  // namespace

RequestDecoder::RequestDecoder(WireLimits limits, LegacyDialect legacy)
    : limits_(limits), legacy_(legacy) {}

void RequestDecoder::resolveAmbiguityAsV1a() {
  if (dialect_ == Dialect::kV1) dialect_ = Dialect::kV1a;
}

std::optional<Op> RequestDecoder::mapOpcode(uint8_t code, std::string_view bytes,
                                            bool& ambiguous) {
  ambiguous = false;
  if (dialect_ != Dialect::kV1) return detail::opOfCode(dialect_, code);
  // v1 (torch 1.13-2.1, not yet told apart): opcodes 0-6 mean the same in v1a and v1b.
  if (code <= 6) return detail::opOfCode(Dialect::kV1a, code);
  if (code == 7) return Op::kDeleteKey;  // v1b numbering; see the header
  if (code >= 9) {
    auto op = detail::opOfCode(Dialect::kV1b, code);
    if (op) dialect_ = Dialect::kV1b;
    return op;
  }
  // Opcode 8: v1a DELETE_KEY or v1b APPEND. Look past the key.
  uint64_t len = 0;
  if (bytes.size() < 9) return Op::kDeleteKey;  // body incomplete either way
  std::memcpy(&len, bytes.data() + 1, sizeof(len));
  if (len > limits_.maxKeyBytes || bytes.size() - 9 < len) return Op::kDeleteKey;
  if (bytes.size() - 9 == len) {
    ambiguous = true;
    return Op::kDeleteKey;
  }
  dialect_ = Dialect::kV1b;
  return Op::kAppend;
}

DecodeResult RequestDecoder::decode(std::string_view bytes) {
  if (bytes.empty()) return NeedMore{1, false};
  if (dialect_ == Dialect::kUnknown) {
    static constexpr unsigned char kMagic[4] = {0xCE, 0xF7, 0x85, 0x3C};
    const std::size_t n = std::min<std::size_t>(bytes.size() - 1, 4);
    if (bytes[0] == 0 && std::memcmp(bytes.data() + 1, kMagic, n) == 0) {
      if (n < 4) return NeedMore{5, false};
      dialect_ = Dialect::kV2;
    } else {
      dialect_ = legacy_ == LegacyDialect::kTorch113  ? Dialect::kV1a
                 : legacy_ == LegacyDialect::kTorch21 ? Dialect::kV1b
                                                       : Dialect::kV1;
    }
  }
  const auto code = static_cast<uint8_t>(bytes[0]);
  bool ambiguous = false;
  const auto op = mapOpcode(code, bytes, ambiguous);
  if (!op) {
    return Malformed{"unknown opcode " + std::to_string(code) + " for dialect " +
                     std::string(dialectName(dialect_))};
  }
  if (ambiguous) return NeedMore{bytes.size() + 1, true};
  Request r;
  r.op = *op;
  // A new request must not expose the previous request's keys; a resumed one keeps its own.
  if (!list_.resuming) list_.keys.clear();
  Cursor c(bytes, 1, limits_.maxRequestBytes);
  if (!parseBody(c, limits_, r, list_)) {
    if (c.malformed()) list_.resuming = false;
    return finish(c);
  }
  r.keys = list_.keys;
  r.size = c.pos();
  return r;
}

}  // namespace ddp::wire
