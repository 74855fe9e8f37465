#include "launcher/cli/cli_values.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>

#include "launcher/cli/cli.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp::detail {
namespace {

std::string trim(const std::string& s) {
  auto begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  auto end = s.find_last_not_of(" \t");
  return s.substr(begin, end - begin + 1);
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::toupper(c); });
  return s;
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string::size_type start = 0;
  while (true) {
    auto pos = s.find(sep, start);
    parts.push_back(s.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) return parts;
    start = pos + 1;
  }
}

std::optional<int> toInt(const std::string& s) {
  int value = 0;
  if (s.empty() || !std::isdigit(static_cast<unsigned char>(s.front()))) return std::nullopt;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;
  return value;
}

StdStreams toStreams(const std::string& digit) {
  auto v = toInt(digit);
  if (!v || *v > 3) throw ConfigError("stream selector '" + digit + "' is not 0, 1, 2 or 3");
  return static_cast<StdStreams>(*v);
}

}  // namespace

namespace {

// Digits only: a number, however large.
bool allDigits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

NodeRange parseNnodes(const std::string& text) {
  auto parts = split(text, ':');
  if (parts.size() > 2) throw ConfigError("not in \"N\" or \"MIN:MAX\" format");
  for (const auto& part : parts) {
    if (allDigits(trim(part)) && !toInt(trim(part))) {
      throw ConfigError("MIN and MAX must be between 1 and " +
                        std::to_string(std::numeric_limits<int>::max()));
    }
  }
  auto minNodes = toInt(trim(parts[0]));
  auto maxNodes = parts.size() == 2 ? toInt(trim(parts[1])) : minNodes;
  if (!minNodes || !maxNodes) throw ConfigError("not in \"N\" or \"MIN:MAX\" format (integers)");
  if (*minNodes <= 0 || *minNodes > *maxNodes)
    throw ConfigError("need 0 < MIN <= MAX, got MIN=" + std::to_string(*minNodes) +
                      " MAX=" + std::to_string(*maxNodes));
  return {*minNodes, *maxNodes};
}

int parseInt(const std::string& text, int minValue, int maxValue) {
  auto t = trim(text);
  bool negative = !t.empty() && t.front() == '-';
  const std::string digits = negative ? t.substr(1) : t;
  auto v = toInt(digits);
  const auto outOfRange = [&] {
    return ConfigError("must be between " + std::to_string(minValue) + " and " +
                       std::to_string(maxValue));
  };
  if (!v) {
    // All digits yet no int: too large for one, so out of range whatever the bounds.
    if (allDigits(digits)) throw outOfRange();
    throw ConfigError("not an integer");
  }
  int value = negative ? -*v : *v;
  if (value < minValue || value > maxValue) throw outOfRange();
  return value;
}

bool parseEnvBool(const std::string& text) {
  auto t = lower(trim(text));
  if (t.empty()) return true;
  if (t == "true" || t == "t" || t == "yes" || t == "y") return true;
  if (t == "false" || t == "f" || t == "no" || t == "n") return false;
  auto v = toInt(t);
  if (!v) throw ConfigError("not a boolean (use 1 or 0)");
  return *v != 0;
}

bool parseConfBool(const std::string& text) {
  auto t = lower(trim(text));
  if (t == "1" || t == "true" || t == "t" || t == "yes" || t == "y") return true;
  if (t == "0" || t == "false" || t == "f" || t == "no" || t == "n") return false;
  throw ConfigError("not a boolean (use true/false, 1/0, yes/no)");
}

std::chrono::milliseconds parseDuration(const std::string& text) {
  auto t = lower(trim(text));
  double scale = 1000.0;
  if (t.size() > 2 && t.ends_with("ms")) {
    scale = 1.0;
    t.resize(t.size() - 2);
  } else if (t.size() > 1 && t.ends_with("s")) {
    t.resize(t.size() - 1);
  }
  double value = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (t.empty() || ec != std::errc() || ptr != t.data() + t.size() || !std::isfinite(value) ||
      value < 0 || value * scale > 1e12)
    throw ConfigError("not a non-negative duration in seconds (e.g. 30, 2.5 or 250ms)");
  return std::chrono::milliseconds(static_cast<long long>(std::llround(value * scale)));
}

StreamSpec parseStreamSpec(const std::string& text) {
  auto t = trim(text);
  StreamSpec spec;
  if (t.find(':') == std::string::npos) {
    if (t.size() != 1) throw ConfigError("expected 0, 1, 2, 3 or a map like 0:1,1:3");
    spec.all = toStreams(t);
    return spec;
  }
  for (const auto& item : split(t, ',')) {
    auto kv = split(item, ':');
    auto rank = kv.size() == 2 ? toInt(trim(kv[0])) : std::nullopt;
    if (!rank) throw ConfigError("'" + item + "' is not LOCAL_RANK:0..3 (expected e.g. 0:1,1:3)");
    if (!spec.perRank.emplace(*rank, toStreams(trim(kv[1]))).second)
      throw ConfigError("local rank " + std::to_string(*rank) + " is listed twice");
  }
  return spec;
}

std::vector<int> parseRankList(const std::string& text) {
  std::vector<int> ranks;
  if (trim(text).empty()) return ranks;
  for (const auto& item : split(text, ',')) {
    auto rank = toInt(trim(item));
    if (!rank) throw ConfigError("'" + item + "' is not a local rank (expected e.g. 0,2)");
    ranks.push_back(*rank);
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::vector<int> parseSignalList(const std::string& text) {
  std::vector<int> signals;
  for (const auto& item : split(text, ',')) {
    auto name = upper(trim(item));
    if (name.empty()) throw ConfigError("empty signal name in the list");
    std::optional<int> signo = toInt(name);
    if (!signo) {
      auto bare = name.starts_with("SIG") ? name.substr(3) : name;
      for (int s = 1; s < NSIG && !signo; ++s) {
        const char* abbrev = sigabbrev_np(s);
        if (abbrev && bare == abbrev) signo = s;
      }
    }
    if (!signo || *signo <= 0 || *signo >= NSIG) throw ConfigError("unknown signal '" + item + "'");
    if (*signo == SIGKILL || *signo == SIGSTOP)
      throw ConfigError(signalName(*signo) + " cannot be caught or forwarded");
    if (std::find(signals.begin(), signals.end(), *signo) == signals.end()) signals.push_back(*signo);
  }
  return signals;
}

std::map<std::string, std::string> parseRdzvConf(const std::string& text) {
  std::map<std::string, std::string> conf;
  if (trim(text).empty()) return conf;
  for (const auto& item : split(trim(text), ',')) {
    auto eq = item.find('=');
    auto key = trim(item.substr(0, eq));
    if (key.empty()) throw ConfigError("must be in the format <key1>=<value1>,...,<keyN>=<valueN>");
    auto value = eq == std::string::npos ? std::string() : trim(item.substr(eq + 1));
    if (value.empty()) throw ConfigError("option '" + key + "' must have a value");
    conf[key] = value;
  }
  return conf;
}

RdzvBackend parseBackend(const std::string& text) {
  auto t = lower(trim(text));
  if (t == "static") return RdzvBackend::kStatic;
  if (t == "c10d") return RdzvBackend::kC10d;
  if (t == "etcd") return RdzvBackend::kEtcd;
  if (t == "etcd-v2") return RdzvBackend::kEtcdV2;
  throw ConfigError("unknown backend (choose static, c10d, etcd or etcd-v2)");
}

const char* backendName(RdzvBackend backend) {
  switch (backend) {
    case RdzvBackend::kStatic: return "static";
    case RdzvBackend::kC10d: return "c10d";
    case RdzvBackend::kEtcd: return "etcd";
    case RdzvBackend::kEtcdV2: return "etcd-v2";
  }
  return "unknown";
}

std::vector<std::string> parseFilterList(const std::string& text) {
  std::vector<std::string> filters;
  std::string current;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ',') {
      current += text[i];
    } else if (i + 1 < text.size() && text[i + 1] == ',') {
      current += ',';
      ++i;
    } else {
      if (!current.empty()) filters.push_back(current);
      current.clear();
    }
  }
  if (!current.empty()) filters.push_back(current);
  return filters;
}

std::string parseLogLevel(const std::string& text) {
  auto t = lower(trim(text));
  if (t == "warning") return "warn";
  if (t == "fatal") return "critical";
  for (const char* level : {"trace", "debug", "info", "warn", "error", "critical", "off"})
    if (t == level) return t;
  throw ConfigError("unknown log level (choose trace, debug, info, warn, error, critical or off)");
}

}  // namespace ddp::detail

namespace ddp {

int resolveNprocPerNode(const std::string& spec, const EnvLookup& getenv) {
  if (spec == "cpu") return countCpus();
  if (spec == "gpu") {
    int gpus = countGpus(getenv);
    if (gpus == 0)
      throw ConfigError(
          "no usable GPU: the CUDA driver/runtime reports none, no /dev/nvidia<N> device files, "
          "or CUDA_VISIBLE_DEVICES hides them all (use a number, 'cpu' or 'auto')");
    return gpus;
  }
  if (spec == "auto") {
    int gpus = countGpus(getenv);
    return gpus > 0 ? gpus : countCpus();
  }
  try {
    return detail::parseInt(spec, 1, 1 << 16);
  } catch (const ConfigError&) {
    // A positive number past the bound is told the bound; a word, 0 or a sign, the choices.
    const std::string t = detail::trim(spec);
    if (!t.empty() && t.find_first_not_of("0123456789") == std::string::npos &&
        t.find_first_not_of('0') != std::string::npos) {
      throw;
    }
    throw ConfigError("expected a positive integer, 'gpu', 'cpu' or 'auto'");
  }
}

}  // namespace ddp
