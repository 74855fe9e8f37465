#include "rendezvous/wire/wire_codec.hpp"

#include <array>
#include <bit>
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

static_assert(std::endian::native == std::endian::little,
              "the TCPStore wire format is little-endian; big-endian hosts need byte swaps");

// Opcode tables, indexed by the opcode byte; see the header for the numbering.
constexpr std::array<Op, 9> kV1aOps = {Op::kSet,   Op::kCompareSet, Op::kGet,
                                       Op::kAdd,   Op::kCheck,      Op::kWait,
                                       Op::kGetNumKeys, Op::kWatchKey, Op::kDeleteKey};
constexpr std::array<Op, 12> kV1bOps = {
    Op::kSet,  Op::kCompareSet, Op::kGet,       Op::kAdd,     Op::kCheck,    Op::kWait,
    Op::kGetNumKeys, Op::kDeleteKey, Op::kAppend, Op::kMultiGet, Op::kMultiSet, Op::kCancelWait};
constexpr std::array<Op, 19> kV2Ops = {
    Op::kValidate,  Op::kSet,       Op::kCompareSet, Op::kGet,       Op::kAdd,
    Op::kCheck,     Op::kWait,      Op::kGetNumKeys, Op::kDeleteKey, Op::kAppend,
    Op::kMultiGet,  Op::kMultiSet,  Op::kCancelWait, Op::kPing,      Op::kQueuePush,
    Op::kQueuePop,  Op::kQueueLen,  Op::kListKeys,   Op::kBarrier};

template <std::size_t N>
std::optional<Op> lookup(const std::array<Op, N>& table, uint8_t code) {
  if (code >= N) return std::nullopt;
  return table[code];
}

template <std::size_t N>
std::optional<uint8_t> reverseLookup(const std::array<Op, N>& table, Op op) {
  for (std::size_t i = 0; i < N; ++i) {
    if (table[i] == op) return static_cast<uint8_t>(i);
  }
  return std::nullopt;
}

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

std::string_view opName(Op op) {
  switch (op) {
    case Op::kValidate: return "VALIDATE";
    case Op::kSet: return "SET";
    case Op::kCompareSet: return "COMPARE_SET";
    case Op::kGet: return "GET";
    case Op::kAdd: return "ADD";
    case Op::kCheck: return "CHECK";
    case Op::kWait: return "WAIT";
    case Op::kGetNumKeys: return "GETNUMKEYS";
    case Op::kWatchKey: return "WATCH_KEY";
    case Op::kDeleteKey: return "DELETE_KEY";
    case Op::kAppend: return "APPEND";
    case Op::kMultiGet: return "MULTI_GET";
    case Op::kMultiSet: return "MULTI_SET";
    case Op::kCancelWait: return "CANCEL_WAIT";
    case Op::kPing: return "PING";
    case Op::kQueuePush: return "QUEUE_PUSH";
    case Op::kQueuePop: return "QUEUE_POP";
    case Op::kQueueLen: return "QUEUE_LEN";
    case Op::kListKeys: return "LIST_KEYS";
    case Op::kBarrier: return "BARRIER";
    case Op::kHello: return "HELLO";
    case Op::kOnClose: return "ON_CLOSE";
    case Op::kOnCloseClear: return "ON_CLOSE_CLEAR";
    case Op::kRequestId: return "REQUEST_ID";
  }
  return "?";
}

std::string_view dialectName(Dialect dialect) {
  switch (dialect) {
    case Dialect::kUnknown: return "unknown";
    case Dialect::kV1: return "v1 (1.13-2.1)";
    case Dialect::kV1a: return "v1a (1.13/2.0)";
    case Dialect::kV1b: return "v1b (2.1)";
    case Dialect::kV2: return "v2 (2.2+)";
  }
  return "?";
}

std::optional<uint8_t> opcodeFor(Dialect dialect, Op op) {
  switch (dialect) {
    case Dialect::kV1a: return reverseLookup(kV1aOps, op);
    case Dialect::kV1b: return reverseLookup(kV1bOps, op);
    case Dialect::kV2: {
      const auto code = reverseLookup(kV2Ops, op);
      return code ? code : detail::extensionOpcode(op);
    }
    case Dialect::kUnknown:
    case Dialect::kV1: return std::nullopt;
  }
  return std::nullopt;
}

RequestDecoder::RequestDecoder(WireLimits limits, LegacyDialect legacy)
    : limits_(limits), legacy_(legacy) {}

void RequestDecoder::resolveAmbiguityAsV1a() {
  if (dialect_ == Dialect::kV1) dialect_ = Dialect::kV1a;
}

std::optional<Op> RequestDecoder::mapOpcode(uint8_t code, std::string_view bytes,
                                            bool& ambiguous) {
  ambiguous = false;
  switch (dialect_) {
    case Dialect::kV2: {
      const auto op = lookup(kV2Ops, code);
      return op ? op : detail::extensionOp(code);
    }
    case Dialect::kV1a: return lookup(kV1aOps, code);
    case Dialect::kV1b: return lookup(kV1bOps, code);
    case Dialect::kUnknown: return std::nullopt;
    case Dialect::kV1: break;
  }
  if (code <= 6) return kV1aOps[code];
  if (code == 7) return Op::kDeleteKey;  // v1b numbering; see the header
  if (code >= 9) {
    auto op = lookup(kV1bOps, code);
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

// ---- Encoding ---------------------------------------------------------------------------------

void putU8(std::string& out, uint8_t v) { out.push_back(static_cast<char>(v)); }

void putU32(std::string& out, uint32_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void putI64(std::string& out, int64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void putU64(std::string& out, uint64_t v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof(v));
}

void putStr(std::string& out, std::string_view s) {
  putU64(out, s.size());
  out.append(s.data(), s.size());
}

void encodeRequest(std::string& out, Dialect dialect, const Request& r) {
  const auto code = opcodeFor(dialect, r.op);
  if (!code) {
    throw ProtocolError("the " + std::string(dialectName(dialect)) +
                        " TCPStore dialect has no " + std::string(opName(r.op)) + " request");
  }
  putU8(out, *code);
  switch (r.op) {
    case Op::kValidate: putU32(out, kValidateMagic); break;
    case Op::kPing: putU32(out, r.nonce); break;
    case Op::kSet:
    case Op::kAppend:
    case Op::kQueuePush:
      putStr(out, r.key);
      putStr(out, r.value);
      break;
    case Op::kCompareSet:
      putStr(out, r.key);
      putStr(out, r.value);
      putStr(out, r.desired);
      break;
    case Op::kGet:
    case Op::kWatchKey:
    case Op::kDeleteKey:
    case Op::kQueuePop:
    case Op::kQueueLen: putStr(out, r.key); break;
    case Op::kAdd:
    case Op::kBarrier:
      putStr(out, r.key);
      putI64(out, r.number);
      break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kMultiGet:
    case Op::kMultiSet:
      putU64(out, r.op == Op::kMultiSet ? r.keys.size() / 2 : r.keys.size());
      for (auto k : r.keys) putStr(out, k);
      break;
    case Op::kGetNumKeys:
    case Op::kCancelWait:
    case Op::kListKeys: break;
    case Op::kHello:
    case Op::kOnClose:
    case Op::kOnCloseClear:
    case Op::kRequestId: detail::encodeExtensionBody(out, r); break;
  }
}

ReplyResult decodeReply(std::string_view bytes, Op op, std::size_t keyCount,
                        std::size_t maxValueBytes) {
  Reply reply;
  Cursor c(bytes, 0, ~std::size_t{0});
  bool ok = true;
  std::string_view v;
  switch (op) {
    case Op::kValidate:
    case Op::kSet:
    case Op::kAppend:
    case Op::kMultiSet:
    case Op::kQueuePush:
    case Op::kRequestId:
      return Malformed{std::string(opName(op)) + " has no reply"};
    case Op::kGet:
    case Op::kCompareSet:
      ok = c.str(v, maxValueBytes, "value");
      if (ok) reply.values.push_back(v);
      break;
    case Op::kAdd:
    case Op::kGetNumKeys:
    case Op::kDeleteKey:
    case Op::kQueueLen: ok = c.scalar(reply.integer); break;
    case Op::kCheck:
    case Op::kWait:
    case Op::kCancelWait:
    case Op::kBarrier:
    case Op::kWatchKey: ok = c.scalar(reply.status); break;
    case Op::kPing: ok = c.scalar(reply.nonce); break;
    case Op::kMultiGet:
      for (std::size_t i = 0; ok && i < keyCount; ++i) {
        ok = c.str(v, maxValueBytes, "value");
        if (ok) reply.values.push_back(v);
      }
      break;
    case Op::kQueuePop:
      ok = c.scalar(reply.integer);
      if (ok && reply.integer > 0) {
        ok = c.str(v, maxValueBytes, "value");
        if (ok) reply.values.push_back(v);
      }
      break;
    case Op::kListKeys:
      ok = c.scalar(reply.integer);
      if (ok && reply.integer < 0) return Malformed{"negative LIST_KEYS count"};
      for (int64_t i = 0; ok && i < reply.integer; ++i) {
        ok = c.str(v, maxValueBytes, "key");
        if (ok) reply.values.push_back(v);
      }
      break;
    case Op::kHello:
    case Op::kOnClose:
    case Op::kOnCloseClear: ok = detail::decodeExtensionReply(c, op, reply, maxValueBytes); break;
  }
  if (!ok) {
    if (c.malformed()) return Malformed{std::move(c.reason())};
    return NeedMore{c.needed(), false};
  }
  reply.size = c.pos();
  return reply;
}

}  // namespace ddp::wire
