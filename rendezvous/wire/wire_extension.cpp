// ddprun's extension of the v2 dialect: HELLO, ON_CLOSE, ON_CLOSE_CLEAR, REQUEST_ID, and the busy
// notice. The byte layout is documented in wire_codec.hpp; this file holds its parsing and encoding.
#include <algorithm>
#include <array>

#include "rendezvous/wire/detail/wire_cursor.hpp"
#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::wire {

namespace detail {

namespace {

struct ExtensionOpcode {
  uint8_t code;
  Op op;
};

// Far above torch's v2 opcodes (0..18 today), so torch can grow without meeting them.
constexpr std::array<ExtensionOpcode, 4> kExtensionOps = {{
    {0xF0, Op::kHello},
    {0xF1, Op::kOnClose},
    {0xF2, Op::kOnCloseClear},
    {0xF3, Op::kRequestId},
}};

// HELLO's fields: u64 n, then n x (str name, str value).
bool parseFields(Cursor& c, const WireLimits& limits, std::vector<std::string_view>& fields) {
  uint64_t n = 0;
  if (!c.scalar(n)) return false;
  if (n > limits.maxHelloFields) {
    return c.fail("HELLO with " + std::to_string(n) + " fields exceeds the limit of " +
                  std::to_string(limits.maxHelloFields));
  }
  fields.clear();
  for (uint64_t i = 0; i < 2 * n; ++i) {
    std::string_view s;
    if (!c.str(s, limits.maxKeyBytes, "HELLO field")) return false;
    fields.push_back(s);
  }
  return true;
}

void putFields(std::string& out, std::span<const std::string_view> fields) {
  putU64(out, fields.size() / 2);
  for (std::size_t i = 0; i + 1 < fields.size(); i += 2) {
    putStr(out, fields[i]);
    putStr(out, fields[i + 1]);
  }
}

}  // namespace

std::optional<Op> extensionOp(uint8_t code) {
  for (const auto& entry : kExtensionOps) {
    if (entry.code == code) return entry.op;
  }
  return std::nullopt;
}

std::optional<uint8_t> extensionOpcode(Op op) {
  for (const auto& entry : kExtensionOps) {
    if (entry.op == op) return entry.code;
  }
  return std::nullopt;
}

bool parseExtensionBody(Cursor& c, const WireLimits& limits, Request& r, KeyList& list) {
  switch (r.op) {
    case Op::kHello:
      return c.scalar(r.version) && c.scalar(r.capabilities) && parseFields(c, limits, list.keys);
    case Op::kOnClose:
      return c.str(r.key, limits.maxKeyBytes, "key") &&
             c.str(r.value, limits.maxValueBytes, "expected value") &&
             c.str(r.desired, limits.maxValueBytes, "desired value");
    case Op::kOnCloseClear:
      return parseKeyList(c, limits, false, list);
    case Op::kRequestId:
      return c.scalar(r.client) && c.scalar(r.sequence);
    default:
      return c.fail("not an extension op");
  }
}

void encodeExtensionBody(std::string& out, const Request& r) {
  switch (r.op) {
    case Op::kHello:
      putU32(out, r.version);
      putU64(out, r.capabilities);
      putFields(out, r.keys);
      break;
    case Op::kOnClose:
      putStr(out, r.key);
      putStr(out, r.value);
      putStr(out, r.desired);
      break;
    case Op::kOnCloseClear:
      putU64(out, r.keys.size());
      for (auto k : r.keys) putStr(out, k);
      break;
    case Op::kRequestId:
      putU64(out, r.client);
      putU64(out, r.sequence);
      break;
    default: break;
  }
}

bool decodeExtensionReply(Cursor& c, Op op, Reply& reply, std::size_t maxValueBytes) {
  if (op != Op::kHello) return c.scalar(reply.integer);  // ON_CLOSE, ON_CLOSE_CLEAR: i64
  uint64_t n = 0;
  if (!c.scalar(reply.status) || !c.scalar(reply.version) || !c.scalar(reply.capabilities) ||
      !c.scalar(n)) {
    return false;
  }
  // A sane server sends a few fields; a huge count is a broken stream, not a reason to allocate.
  if (n > WireLimits{}.maxHelloFields) {
    return c.fail("HELLO reply with " + std::to_string(n) + " fields");
  }
  for (uint64_t i = 0; i < 2 * n; ++i) {
    std::string_view s;
    if (!c.str(s, maxValueBytes, "HELLO field")) return false;
    reply.values.push_back(s);
  }
  return true;
}

}  // namespace detail

void encodeHelloReply(std::string& out, uint8_t status, uint64_t capabilities,
                      std::span<const std::string_view> fields) {
  putU8(out, status);
  putU32(out, kExtensionVersion);
  putU64(out, capabilities);
  detail::putFields(out, fields);
}

void encodeBusyNotice(std::string& out, std::string_view reason) {
  out.append(kBusyMagic);
  out.push_back(' ');
  for (std::size_t i = 0; i < reason.size() && i < kBusyReasonMax; ++i) {
    const auto c = static_cast<unsigned char>(reason[i]);
    out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
  }
  out.push_back('\n');
}

BusyNotice decodeBusyNotice(std::string_view bytes) {
  BusyNotice out;
  const std::size_t head = std::min(bytes.size(), kBusyMagic.size());
  if (bytes.substr(0, head) != kBusyMagic.substr(0, head)) return out;
  out.kind = BusyNotice::Kind::kPartial;
  if (bytes.size() <= kBusyMagic.size()) return out;
  const std::string_view rest = bytes.substr(kBusyMagic.size() + 1);
  const std::size_t end = rest.find('\n');
  if (end == std::string_view::npos && rest.size() < kBusyReasonMax) return out;
  out.kind = BusyNotice::Kind::kNotice;
  out.reason = std::string(rest.substr(0, std::min({end, rest.size(), kBusyReasonMax})));
  return out;
}

}  // namespace ddp::wire
