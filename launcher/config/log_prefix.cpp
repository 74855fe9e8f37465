#include "launcher/config/log_prefix.hpp"

#include <optional>
#include <utility>

namespace ddp {
namespace {

struct Variable {
  const char* name;       // ddprun's
  const char* torchName;  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE's
};

constexpr Variable kVariables[] = {
    {"rank", "rank"}, {"local_rank", "local_rank"}, {"role", "role_name"},
    {"host", "hostname"}, {"pid", "pid"}, {"node_rank", "group_rank"},
    {"restart_count", "restart_count"},
};

bool isIdentifierStart(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool isIdentifierChar(char c) { return isIdentifierStart(c) || (c >= '0' && c <= '9'); }

// The identifier at `pos` (empty when there is none).
std::string identifierAt(const std::string& text, size_t pos) {
  size_t end = pos;
  if (end < text.size() && isIdentifierStart(text[end])) {
    while (end < text.size() && isIdentifierChar(text[end])) ++end;
  }
  return text.substr(pos, end - pos);
}

std::optional<std::string> ddprunNameOfTorch(const std::string& torchName) {
  for (const auto& v : kVariables) {
    if (torchName == v.torchName) return std::string(v.name);
  }
  return std::nullopt;
}

std::string valueOf(const std::string& name, const LogPrefixValues& v) {
  if (name == "rank") return std::to_string(v.rank);
  if (name == "local_rank") return std::to_string(v.localRank);
  if (name == "role") return v.role;
  if (name == "host") return v.host;
  if (name == "pid") return std::to_string(v.pid);
  if (name == "node_rank") return std::to_string(v.groupRank);
  return std::to_string(v.restartCount);  // restart_count: the only other known name
}

bool known(const std::string& name) {
  for (const auto& v : kVariables) {
    if (name == v.name) return true;
  }
  return false;
}

std::string doubledBraces(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '{' || c == '}') out += c;
  }
  return out;
}

// Walks a ddprun template: calls literal(text) and variable(name) in order. A {name} whose name is
// no identifier (or that is not closed) is literal text.
template <class Literal, class Var>
void scanDdprun(const std::string& t, Literal literal, Var variable) {
  for (size_t i = 0; i < t.size();) {
    const bool pair = i + 1 < t.size() && t[i + 1] == t[i];
    if ((t[i] == '{' || t[i] == '}') && pair) {
      literal(std::string(1, t[i]));
      i += 2;
      continue;
    }
    if (t[i] == '{') {
      const std::string name = identifierAt(t, i + 1);
      const size_t close = i + 1 + name.size();
      if (!name.empty() && close < t.size() && t[close] == '}') {
        variable(name);
        i = close + 1;
        continue;
      }
    }
    literal(std::string(1, t[i]));
    ++i;
  }
}

}  // namespace

const std::vector<std::string>& logPrefixVariables() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& v : kVariables) out.emplace_back(v.name);
    return out;
  }();
  return names;
}

std::string fromTorchTemplate(const std::string& t, std::vector<std::string>& unknown) {
  std::string out;
  for (size_t i = 0; i < t.size();) {
    if (t[i] != '$') {
      out += doubledBraces(std::string(1, t[i++]));
      continue;
    }
    if (i + 1 < t.size() && t[i + 1] == '$') {  // "$$": one '$'
      out += '$';
      i += 2;
      continue;
    }
    const bool braced = i + 1 < t.size() && t[i + 1] == '{';
    const std::string name = identifierAt(t, i + (braced ? 2 : 1));
    const size_t end = i + (braced ? 2 : 1) + name.size();
    if (name.empty() || (braced && (end >= t.size() || t[end] != '}'))) {
      out += '$';  // not a placeholder: safe_substitute keeps it
      ++i;
      continue;
    }
    const size_t next = end + (braced ? 1 : 0);
    if (auto mapped = ddprunNameOfTorch(name)) {
      out += "{" + *mapped + "}";
    } else {
      unknown.push_back(name);
      out += doubledBraces(t.substr(i, next - i));
    }
    i = next;
  }
  return out;
}

std::vector<std::string> unknownVariables(const std::string& ddprunTemplate) {
  std::vector<std::string> unknown;
  scanDdprun(ddprunTemplate, [](const std::string&) {}, [&](const std::string& name) {
    if (!known(name)) unknown.push_back(name);
  });
  return unknown;
}

std::string formatLogPrefix(const std::string& ddprunTemplate, const LogPrefixValues& values) {
  std::string out;
  scanDdprun(ddprunTemplate, [&](const std::string& text) { out += text; },
             [&](const std::string& name) {
               out += known(name) ? valueOf(name, values) : "{" + name + "}";
             });
  return out;
}

}  // namespace ddp
