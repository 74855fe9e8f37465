// The client's side of the wire: encoding a request in the connection's dialect and decoding the
// reply to it (TcpStoreClient's StoreConnection uses both). The byte layout is wire_codec.hpp's.
#include <string>

#include "rendezvous/base/error.hpp"
#include "rendezvous/wire/detail/wire_cursor.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::wire {

using detail::Cursor;

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

OwnedReply toOwned(const Reply& reply) {
  OwnedReply owned;
  owned.integer = reply.integer;
  owned.status = reply.status;
  owned.nonce = reply.nonce;
  owned.version = reply.version;
  owned.capabilities = reply.capabilities;
  owned.values.assign(reply.values.begin(), reply.values.end());
  owned.size = reply.size;
  return owned;
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
