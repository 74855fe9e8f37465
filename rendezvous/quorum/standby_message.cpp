#include "rendezvous/quorum/standby_message.hpp"

#include "rendezvous/base/error.hpp"

namespace ddp {

std::string encodeStandbyMessage(const EnvEntries& env) {
  std::string payload;
  for (const auto& [name, value] : env) payload += name + "=" + value + '\0';
  std::string out(kStandbyHeaderBytes, '\0');
  const uint64_t n = payload.size();
  for (std::size_t i = 0; i < kStandbyHeaderBytes; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + payload;
}

EnvEntries decodeStandbyMessage(const std::string& payload) {
  EnvEntries env;
  std::size_t pos = 0;
  while (pos < payload.size()) {
    const std::size_t end = payload.find('\0', pos);
    if (end == std::string::npos) {
      throw ConfigError("standby: an entry of the agent's message is not terminated");
    }
    const std::string entry = payload.substr(pos, end - pos);
    const std::size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) {
      throw ConfigError("standby: the agent's message has an entry without NAME=: '" +
                        entry.substr(0, 40) + "'");
    }
    env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
    pos = end + 1;
  }
  return env;
}

uint64_t standbyMessageLength(const unsigned char (&header)[kStandbyHeaderBytes]) {
  uint64_t n = 0;
  for (std::size_t i = kStandbyHeaderBytes; i-- > 0;) n = (n << 8) | header[i];
  return n;
}

}  // namespace ddp
