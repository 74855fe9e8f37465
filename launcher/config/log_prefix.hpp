// LogPrefix: the template of the prefix put before each console line of a worker (--log-prefix,
// or torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE), its variables, and its two syntaxes.
//
//   ddprun (--log-prefix, DDP_LOG_PREFIX)   {name}; "{{" and "}}" are a literal brace
//   torchrun (the environment variable)     Python string.Template: ${name} or $name; "$$" is a
//                                           literal '$' (safe_substitute: anything else stays)
//
//   ddprun name     torchrun name    value
//   rank            rank             the worker's global rank (RANK)
//   local_rank      local_rank       its local rank (LOCAL_RANK)
//   role            role_name        --role (ROLE_NAME)
//   host            hostname         this host's name
//   pid             pid              the worker's process id
//   node_rank       group_rank       this node's rank (GROUP_RANK)
//   restart_count   restart_count    the generation (TORCHELASTIC_RESTART_COUNT)
// torch itself substitutes rank, local_rank and role_name only; the others are what forks of its
// agent add (group_rank, restart_count) and what users ask for (hostname, pid). An unknown
// variable stays in the prefix as written, as with torch's safe_substitute, and is reported by
// unknownVariables() so that the agent warns once at start.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/base/rank_layout.hpp"

namespace ddp {

// What a worker's prefix is made of: its WorkerSpec's RankLayout (rank, local_rank and node_rank
// are its rank, localRank and groupRank; the sizes are known, but no variable shows them), then
// the rest of the table.
struct LogPrefixValues : RankLayout {
  std::string role;
  std::string host;
  int64_t pid = 0;
  int64_t restartCount = 0;
};

// The ddprun names, in the order of the table above.
const std::vector<std::string>& logPrefixVariables();

// torchrun's template in ddprun's syntax: known variables become {name}, literal braces are
// doubled, an unknown variable stays as written (its braces doubled) and its name is appended to
// `unknown`. Never throws.
std::string fromTorchTemplate(const std::string& torchTemplate, std::vector<std::string>& unknown);

// The {name}s of a ddprun template that are no variable, in order of appearance.
std::vector<std::string> unknownVariables(const std::string& ddprunTemplate);

// Expands a ddprun template. Unknown {name}s stay as written.
std::string formatLogPrefix(const std::string& ddprunTemplate, const LogPrefixValues& values);

}  // namespace ddp
