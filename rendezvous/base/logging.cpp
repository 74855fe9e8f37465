#include "rendezvous/base/logging.hpp"

#include <unistd.h>

#include <cstdlib>
#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/local_address.hpp"

namespace ddp {
namespace {

std::mutex gMutex;

spdlog::level::level_enum parseLevel(const std::string& name) {
  const auto level = spdlog::level::from_str(name);
  // from_str maps unknown names to "off"; only accept "off" when asked for explicitly.
  if (level == spdlog::level::off && name != "off") {
    throw ConfigError("unknown log level '" + name +
                      "' (expected trace, debug, info, warn, error, critical or off)");
  }
  return level;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  std::lock_guard<std::mutex> lock(gMutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::stderr_color_mt(name);
  created->set_level(spdlog::get_level());
  return created;
}

void setupLogging(const std::string& level, const std::string& tag) {
  std::string chosen = level;
  if (chosen.empty()) {
    const char* env = std::getenv("DDP_LOG_LEVEL");
    chosen = (env != nullptr && *env != '\0') ? env : "info";
  }
  const auto parsed = parseLevel(chosen);
  std::string pattern = "[%Y-%m-%d %H:%M:%S.%e] [%^%l%$] [%n] [" + hostName() + ":%P";
  if (!tag.empty()) pattern += " " + tag;
  pattern += "] %v";
  std::lock_guard<std::mutex> lock(gMutex);
  spdlog::set_level(parsed);
  spdlog::set_pattern(pattern);
  spdlog::apply_all([&](const std::shared_ptr<spdlog::logger>& l) { l->set_level(parsed); });
}

}  // namespace ddp
