#include "rendezvous/algorithm/detail/rendezvous_text.hpp"

namespace ddp::detail {

std::string escapeField(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in) {
    if (c == '%') {
      out += "%25";
    } else if (c == '\t') {
      out += "%09";
    } else if (c == '\n') {
      out += "%0A";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescapeField(std::string_view in) {
  if (in.find('%') == std::string_view::npos) return std::string(in);  // the common case
  std::string out;
  out.reserve(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string_view code = in[i] == '%' ? in.substr(i, 3) : std::string_view();
    if (code == "%25" || code == "%09" || code == "%0A") {
      out += code == "%25" ? '%' : (code == "%09" ? '\t' : '\n');
      i += 2;
    } else {
      out += in[i];
    }
  }
  return out;
}

std::vector<std::string_view> splitFields(std::string_view line, size_t n, const char* what) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (out.size() + 1 < n) {
    const auto tab = line.find('\t', pos);
    if (tab == std::string_view::npos) break;
    out.push_back(line.substr(pos, tab - pos));
    pos = tab + 1;
  }
  out.push_back(line.substr(pos));
  if (out.size() != n || out.back().find('\t') != std::string_view::npos) {
    throw ProtocolError(std::string("malformed ") + what + " in the rendezvous store: '" +
                        std::string(line.substr(0, 200)) + "'");
  }
  return out;
}

std::string_view nextLine(std::string_view text, size_t& pos, const char* what) {
  const auto eol = text.find('\n', pos);
  if (eol == std::string_view::npos) {
    throw ProtocolError(std::string("truncated ") + what + " in the rendezvous store");
  }
  const std::string_view line = text.substr(pos, eol - pos);
  pos = eol + 1;
  return line;
}

}  // namespace ddp::detail
