// Cursor: a bounds-checked reader over the front of a byte buffer, and the helpers that
// request_decoder.cpp (the server's decoding), client_codec.cpp (the client's encoding and reply
// decoding), wire_codec.cpp (opcode tables, names) and wire_extension.cpp (ddprun's extension ops)
// share.
// Pure; a Cursor is used by one thread at a time.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::wire::detail {

static_assert(std::endian::native == std::endian::little,
              "the TCPStore wire format is little-endian; big-endian hosts need byte swaps");

// A bounds-checked reader over the front of a byte buffer. The first failure sticks: later reads
// return false, and result() tells NeedMore (with the size needed) from Malformed.
class Cursor {
 public:
  Cursor(std::string_view bytes, std::size_t pos, std::size_t maxTotal)
      : bytes_(bytes), pos_(pos), maxTotal_(maxTotal) {}

  template <typename T>
  bool scalar(T& out) {
    if (!have(sizeof(T))) return false;
    std::memcpy(&out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return true;
  }

  // u64 length + bytes, at most `max` bytes long.
  bool str(std::string_view& out, std::size_t max, const char* what) {
    uint64_t len = 0;
    if (!scalar(len)) return false;
    if (len > max) return fail(std::string(what) + " of " + std::to_string(len) +
                               " bytes exceeds the limit of " + std::to_string(max));
    if (!have(static_cast<std::size_t>(len))) return false;
    out = bytes_.substr(pos_, static_cast<std::size_t>(len));
    pos_ += static_cast<std::size_t>(len);
    return true;
  }

  // Continues at `pos` (resuming a key list parsed in part).
  void seek(std::size_t pos) { pos_ = pos; }
  std::string_view bytes() const { return bytes_; }

  bool fail(std::string reason) {
    if (ok_) reason_ = std::move(reason);
    ok_ = false;
    malformed_ = true;
    return false;
  }

  bool ok() const { return ok_; }
  bool malformed() const { return malformed_; }
  std::size_t pos() const { return pos_; }
  std::size_t needed() const { return needed_; }
  std::string& reason() { return reason_; }

 private:
  bool have(std::size_t n) {
    if (!ok_) return false;
    if (pos_ + n > maxTotal_) {
      return fail("request of at least " + std::to_string(pos_ + n) +
                  " bytes exceeds the limit of " + std::to_string(maxTotal_));
    }
    if (bytes_.size() - pos_ >= n) return true;
    ok_ = false;
    needed_ = pos_ + n;
    return false;
  }

  std::string_view bytes_;
  std::size_t pos_;
  std::size_t maxTotal_;
  bool ok_ = true;
  bool malformed_ = false;
  std::size_t needed_ = 0;
  std::string reason_;
};

// u64 n, then n keys (pairs: key, value) into `list.keys`, within the limits. Resumes where an
// earlier call on the same request stopped (see KeyList).
bool parseKeyList(Cursor& c, const WireLimits& limits, bool pairs, KeyList& list);

// The op of an opcode byte in `dialect` (v1a, v1b, or v2 with ddprun's extension ops); nullopt for
// an unknown byte, and for kUnknown and kV1 (the decoder tells v1a from v1b itself).
std::optional<Op> opOfCode(Dialect dialect, uint8_t code);

// ---- ddprun's extension (wire_extension.cpp) --------------------------------------------------

// The extension op of a v2 opcode byte, if it is one.
std::optional<Op> extensionOp(uint8_t code);
std::optional<uint8_t> extensionOpcode(Op op);
// Arguments of HELLO / ON_CLOSE / ON_CLOSE_CLEAR (the opcode byte is consumed).
bool parseExtensionBody(Cursor& c, const WireLimits& limits, Request& r, KeyList& list);
// Appends the arguments of an extension request.
void encodeExtensionBody(std::string& out, const Request& r);
// Reads the reply of an extension request into `reply`.
bool decodeExtensionReply(Cursor& c, Op op, Reply& reply, std::size_t maxValueBytes);

}  // namespace ddp::wire::detail
