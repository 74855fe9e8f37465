// The text framing shared by the rendezvous's stored values (join records, rosters, round
// headers, assignments): tab-separated fields, one record per line; strings escape '%', '\t' and
// '\n' as %25, %09 and %0A, so any host name or message survives. Cheap to parse: values an
// agent reads on its common path are a few lines long.
//
// Thread safety: pure functions.
#pragma once

#include <charconv>
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/base/error.hpp"

namespace ddp::detail {

// A duration in log and error messages: "1500 ms".
inline std::string msText(std::chrono::milliseconds d) {
  return std::to_string(d.count()) + " ms";
}

std::string escapeField(const std::string& in);
std::string unescapeField(std::string_view in);

// Splits `line` at tabs into exactly `n` fields; throws ProtocolError naming `what` otherwise.
std::vector<std::string_view> splitFields(std::string_view line, size_t n, const char* what);

// The next line of `text` from `pos` (without its '\n'), moving `pos` past it. Throws
// ProtocolError naming `what` when the line has no '\n'.
std::string_view nextLine(std::string_view text, size_t& pos, const char* what);

// A decimal number filling all of `text`; throws ProtocolError naming `what` otherwise.
template <typename T>
T parseField(std::string_view text, const char* what) {
  T value{};
  const auto r = std::from_chars(text.data(), text.data() + text.size(), value);
  if (r.ec != std::errc() || r.ptr != text.data() + text.size()) {
    throw ProtocolError(std::string("malformed number '") + std::string(text) + "' in " + what +
                        " in the rendezvous store");
  }
  return value;
}

}  // namespace ddp::detail
