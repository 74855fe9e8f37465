// What both sides of the wire share: the opcode tables of each dialect, the names of ops and
// dialects, and the encoding primitives (requests, replies). The server's request decoder is request_decoder.cpp, the client's request encoder and
// reply decoder client_codec.cpp, ddprun's extension ops wire_extension.cpp.
#include "rendezvous/wire/wire_codec.hpp"

#include <array>

#include "rendezvous/wire/detail/wire_cursor.hpp"

namespace ddp::wire {

namespace {

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

}  // namespace

namespace detail {

std::optional<Op> opOfCode(Dialect dialect, uint8_t code) {
  switch (dialect) {
    case Dialect::kV1a: return lookup(kV1aOps, code);
    case Dialect::kV1b: return lookup(kV1bOps, code);
    case Dialect::kV2: {
      const auto op = lookup(kV2Ops, code);
      return op ? op : extensionOp(code);
    }
    case Dialect::kUnknown:
    case Dialect::kV1: return std::nullopt;
  }
  return std::nullopt;
}

}  // namespace detail

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

}  // namespace ddp::wire
