#include "rendezvous/base/endpoint.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

std::string trim(const std::string& s) {
  auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return s.substr(begin, s.find_last_not_of(" \t") - begin + 1);
}

bool validHost(const std::string& host) {
  return !host.empty() && std::all_of(host.begin(), host.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == ':' || c == '-' || c == '_';
  });
}

int parsePort(const std::string& text) {
  int port = -1;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, port);
  if (text.empty() || text.size() > 5 || !std::isdigit(static_cast<unsigned char>(text.front())) ||
      ec != std::errc() || ptr != end || port > 65535)
    throw ConfigError("the port must be an integer between 0 and 65535");
  return port;
}

}  // namespace

Endpoint parseEndpoint(const std::string& text, std::optional<int> defaultPort) {
  const std::string t = trim(text);
  if (t.empty()) throw ConfigError("expected HOST[:PORT], got nothing");
  std::string host = t;
  std::optional<std::string> port;
  // "[v6]" alone keeps its colons; otherwise the last colon starts the port (torch's rsplit).
  if (!(t.front() == '[' && t.back() == ']')) {
    if (auto colon = t.rfind(':'); colon != std::string::npos) {
      host = t.substr(0, colon);
      port = t.substr(colon + 1);
    }
  }
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!validHost(host))
    throw ConfigError("the host must be a hostname, an IPv4 address or an IPv6 address in [brackets]");
  if (port) return {host, parsePort(*port)};
  if (!defaultPort) throw ConfigError("the port is missing: expected HOST:PORT");
  return {host, *defaultPort};
}

std::vector<Endpoint> parseEndpointList(const std::string& text, int defaultPort) {
  std::vector<Endpoint> endpoints;
  std::string::size_type start = 0;
  while (start <= text.size()) {
    const auto comma = text.find(',', start);
    std::string item = trim(text.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    // The scheme is the same for every endpoint: https exactly when --rdzv-conf tls_ca is given
    // (checked by the caller, which has the conf).
    if (item.starts_with("https://")) item = item.substr(8);
    if (item.starts_with("http://")) item = item.substr(7);
    if (!item.empty()) endpoints.push_back(parseEndpoint(item, defaultPort));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (endpoints.empty()) throw ConfigError("expected HOST[:PORT][,HOST[:PORT]...], got nothing");
  return endpoints;
}

std::string parseHost(const std::string& text) {
  std::string host = trim(text);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (!validHost(host))
    throw ConfigError("expected a hostname, an IPv4 address or an IPv6 address");
  return host;
}

std::string formatEndpoint(const Endpoint& endpoint) {
  // A host given already bracketed ("[::1]", as a daemon flag may spell it) keeps its brackets.
  const bool v6 = endpoint.host.find(':') != std::string::npos && endpoint.host.front() != '[';
  return (v6 ? "[" + endpoint.host + "]" : endpoint.host) + ":" + std::to_string(endpoint.port);
}

}  // namespace ddp
