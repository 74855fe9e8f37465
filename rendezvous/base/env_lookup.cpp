#include "rendezvous/base/env_lookup.hpp"

#include <cstdlib>

namespace ddp {

std::optional<std::string> processEnv(const std::string& name) {
  const char* value = std::getenv(name.c_str());
  return value ? std::optional<std::string>(value) : std::nullopt;
}

}  // namespace ddp
