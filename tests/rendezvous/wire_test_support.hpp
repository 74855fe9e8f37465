// Helpers of the wire codec's unit tests: captured bytes written as hex, and a decoded request
// that owns its bytes. Catch2 assertions: include only from test sources.
#pragma once

#include <catch2/catch.hpp>

#include <cctype>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/wire/wire_codec.hpp"

namespace ddp::wire::testing {

// "00 0300000000000000 2f6b31" -> bytes (spaces ignored).
inline std::string hex(std::string_view text) {
  std::string out;
  int nibbles = 0;
  unsigned value = 0;
  for (char ch : text) {
    if (ch == ' ') continue;
    value = value * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(ch))
                                                   ? ch - '0'
                                                   : std::tolower(ch) - 'a' + 10);
    if (++nibbles == 2) {
      out.push_back(static_cast<char>(value));
      nibbles = 0;
      value = 0;
    }
  }
  return out;
}

// A decoded request that owns its bytes (Request's views die with the input buffer).
struct Owned {
  Op op;
  std::string key, value, desired;
  int64_t number;
  uint32_t nonce;
  std::vector<std::string> keys;
  std::size_t size;
};

inline Owned decodeOne(RequestDecoder& decoder, const std::string& bytes) {
  auto result = decoder.decode(bytes);
  if (auto* m = std::get_if<Malformed>(&result)) FAIL("malformed: " << m->reason);
  REQUIRE(std::holds_alternative<Request>(result));
  const auto& r = std::get<Request>(result);
  CHECK(r.size == bytes.size());
  return Owned{r.op,     std::string(r.key), std::string(r.value), std::string(r.desired),
               r.number, r.nonce,            {r.keys.begin(), r.keys.end()}, r.size};
}

inline std::vector<std::string> keysOf(const Owned& r) { return r.keys; }

}  // namespace ddp::wire::testing
