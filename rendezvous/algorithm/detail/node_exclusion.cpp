#include "rendezvous/algorithm/detail/node_exclusion.hpp"

#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "rendezvous/base/error.hpp"

namespace ddp::detail {

namespace {

using nlohmann::json;

// Rewrites the job's list through compareSet until no other writer came between the read and
// the write; `change` edits the decoded list. Bounded: the list never holds more than
// kMaxExclusionsKept entries, and each retry follows another agent's successful write.
void rewriteExclusions(Store& store, const RendezvousKeys& keys,
                       const std::function<bool(std::vector<NodeExclusion>&)>& change) {
  const std::string key = keys.exclusions();
  std::optional<std::string> current = peek(store, key);
  while (true) {
    std::vector<NodeExclusion> list = current ? decodeExclusions(*current) : std::vector<NodeExclusion>{};
    if (!change(list)) return;
    if (list.size() > kMaxExclusionsKept) {
      list.erase(list.begin(), list.end() - static_cast<std::ptrdiff_t>(kMaxExclusionsKept));
    }
    std::string value;
    for (const auto& e : list) value += encodeExclusion(e) + "\n";
    // An absent key is expected as "": compareSet creates it then.
    const std::string expected = current.value_or("");
    const std::string now = store.compareSet(key, expected, value);
    if (now == value) return;
    current = now;
  }
}

}  // namespace

std::string encodeExclusion(const NodeExclusion& e) {
  return json{{"host", e.host},
              {"pid", e.pid},
              {"node_rank", e.nodeRank},
              {"generation", e.generation},
              {"why", e.why},
              {"cooldown_ms", e.cooldownMs},
              {"unix_ms", e.unixMs},
              {"returned_at", e.returnedAt}}
      .dump();
}

NodeExclusion decodeExclusion(const std::string& line) {
  try {
    const json j = json::parse(line);
    NodeExclusion e;
    e.host = j.at("host").get<std::string>();
    e.pid = j.at("pid").get<int>();
    e.nodeRank = j.at("node_rank").get<int>();
    e.generation = j.at("generation").get<int64_t>();
    e.why = j.at("why").get<std::string>();
    e.cooldownMs = j.at("cooldown_ms").get<int64_t>();
    e.unixMs = j.at("unix_ms").get<int64_t>();
    e.returnedAt = j.at("returned_at").get<int64_t>();
    return e;
  } catch (const json::exception& ex) {
    throw ProtocolError(std::string("unreadable node exclusion: ") + ex.what());
  }
}

std::vector<NodeExclusion> decodeExclusions(const std::string& value) {
  std::vector<NodeExclusion> list;
  std::istringstream in(value);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    try {
      list.push_back(decodeExclusion(line));
    } catch (const ProtocolError&) {
    }
  }
  return list;
}

ExclusionClaim claimExclusion(Store& store, const RendezvousKeys& keys, int64_t g, int members,
                              int minNodes, const NodeExclusion& exclusion) {
  ExclusionClaim claim;
  claim.members = members;
  claim.leaving = static_cast<int>(store.add(keys.leaving(g), 1));
  claim.spares = static_cast<int>(store.add(keys.spares(g), 0));
  claim.granted = members - claim.leaving + claim.spares >= minNodes;
  if (!claim.granted) {
    store.add(keys.leaving(g), -1);
    return claim;
  }
  rewriteExclusions(store, keys, [&](std::vector<NodeExclusion>& list) {
    list.push_back(exclusion);
    return true;
  });
  store.add(keys.exclusionCount(), 1);
  return claim;
}

void markExclusionReturned(Store& store, const RendezvousKeys& keys, const std::string& host,
                           int pid, int64_t generation) {
  rewriteExclusions(store, keys, [&](std::vector<NodeExclusion>& list) {
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      if (it->host != host || it->pid != pid) continue;
      if (it->returnedAt >= 0) return false;
      it->returnedAt = generation;
      return true;
    }
    return false;
  });
}

}  // namespace ddp::detail
