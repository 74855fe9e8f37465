// Value parsers for ddprun's torchrun-compatible flags: pure functions from the text a user typed
// (on the command line or in a PET_* variable) to typed values.
//
// Every parser throws ConfigError with a message that says what was expected, without naming the
// flag; the caller (cli.cpp) prefixes the flag or variable and the value it came from.
// Thread safety: pure functions, safe from any thread.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "launcher/config/launch_config.hpp"
#include "rendezvous/base/signal_name.hpp"

namespace ddp::detail {

struct NodeRange {
  int minNodes = 1;
  int maxNodes = 1;
};

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
NodeRange parseNnodes(const std::string& text);

// A whole decimal integer in [minValue, maxValue] (no sign games, no trailing junk).
int parseInt(const std::string& text, int minValue, int maxValue);

// torchrun's integer-string booleans ("1", "0"), also true/false/yes/no/y/n/t/f in any case.
// An empty string means "set" (Kubeflow exports PET_STANDALONE="" to request standalone).
bool parseEnvBool(const std::string& text);

// rdzv-conf booleans as torch's RendezvousParameters.get_as_bool: 1/true/t/yes/y, 0/false/f/no/n.
bool parseConfBool(const std::string& text);

// A non-negative duration: seconds with an optional fraction ("30", "2.5", "2.5s") or
// milliseconds with an "ms" suffix ("250ms").
std::chrono::milliseconds parseDuration(const std::string& text);

// -r/--redirects and -t/--tee: "0".."3" for every local rank, or a per-local-rank map
// "0:1,1:3" (ranks not listed get 0). Unlike torchrun, local ranks may have several digits.
StreamSpec parseStreamSpec(const std::string& text);

// --local-ranks-filter: "0,2,3" (empty = every rank). Sorted, duplicates removed.
std::vector<int> parseRankList(const std::string& text);

// --signals-to-handle: comma list of names (SIGUSR1, USR1, sigusr1) or numbers. SIGKILL and
// SIGSTOP cannot be handled and are rejected. Order kept, duplicates removed.
std::vector<int> parseSignalList(const std::string& text);

// --rdzv-conf "k1=v1,k2=v2": split on ',', then on the first '='; keys and values are trimmed;
// an empty key or value is an error (as torch's _parse_rendezvous_config). "" gives {}.
std::map<std::string, std::string> parseRdzvConf(const std::string& text);

// --rdzv-backend: static, c10d, etcd (torchrun's legacy handler) or etcd-v2.
RdzvBackend parseBackend(const std::string& text);

// The --rdzv-backend spelling of a backend ("etcd-v2").
const char* backendName(RdzvBackend backend);

// --duplicate-*-filters: comma list where ",," stands for a literal comma.
std::vector<std::string> parseFilterList(const std::string& text);

// --log-level: trace, debug, info, warn (or warning), error, critical, off; returns spdlog's name.
std::string parseLogLevel(const std::string& text);

}  // namespace ddp::detail
