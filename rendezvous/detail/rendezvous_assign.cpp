#include "rendezvous/detail/rendezvous_assign.hpp"

#include <algorithm>
#include <climits>
#include <map>
#include <optional>
#include <tuple>

#include <nlohmann/json.hpp>

namespace ddp::detail {

using nlohmann::json;

namespace {

json toJson(const JoinRecord& record) {
  const auto& n = record.node;
  return json{{"slot", record.slot}, {"prev", record.prevRank}, {"host", n.host},
              {"addr", n.addr},      {"pid", n.pid},            {"lws", n.localWorldSize},
              {"req", n.requestedRank}, {"role", n.role}};
}

JoinRecord fromJson(const json& j) {
  JoinRecord record;
  record.slot = j.at("slot").get<int64_t>();
  record.prevRank = j.at("prev").get<int>();
  record.node.host = j.at("host").get<std::string>();
  record.node.addr = j.at("addr").get<std::string>();
  record.node.pid = j.at("pid").get<int>();
  record.node.localWorldSize = j.at("lws").get<int>();
  record.node.requestedRank = j.at("req").get<int>();
  record.node.role = j.at("role").get<std::string>();
  return record;
}

template <typename F>
auto parseOrThrow(const std::string& what, const std::string& value, F&& parse) {
  try {
    return parse(json::parse(value));
  } catch (const json::exception& e) {
    throw ProtocolError("malformed " + what + " in the rendezvous store: " + e.what());
  }
}

std::string describe(const JoinRecord& r) {
  return r.node.host + " (addr " + r.node.addr + ", pid " + std::to_string(r.node.pid) + ")";
}

}  // namespace

std::string encodeJoinRecord(const JoinRecord& record) { return toJson(record).dump(); }

JoinRecord decodeJoinRecord(const std::string& value) {
  return parseOrThrow("join record", value, [](const json& j) { return fromJson(j); });
}

std::string encodeMembership(const RoundMembership& m) {
  json members = json::array();
  for (const auto& record : m.members) members.push_back(toJson(record));
  return json{{"gen", m.generation}, {"restarts", m.restartsUsed}, {"error", m.error},
              {"members", members}}
      .dump();
}

RoundMembership decodeMembership(const std::string& value) {
  return parseOrThrow("round result", value, [](const json& j) {
    RoundMembership m;
    m.generation = j.at("gen").get<int64_t>();
    m.restartsUsed = j.at("restarts").get<int>();
    m.error = j.at("error").get<std::string>();
    for (const auto& member : j.at("members")) m.members.push_back(fromJson(member));
    return m;
  });
}

std::vector<JoinRecord> assignNodeRanks(std::vector<JoinRecord> joined, int64_t generation) {
  const int n = static_cast<int>(joined.size());
  std::vector<std::optional<JoinRecord>> byRank(n);
  std::vector<JoinRecord> unranked;
  for (auto& record : joined) {
    const int want = record.node.requestedRank;
    if (want < 0) {
      unranked.push_back(std::move(record));
      continue;
    }
    if (want >= n) {
      throw ConfigError("node " + describe(record) + " asked for node rank " +
                        std::to_string(want) + " but round " + std::to_string(generation) +
                        " has " + std::to_string(n) + " nodes (ranks 0.." +
                        std::to_string(n - 1) + ")");
    }
    if (byRank[want]) {
      throw ConfigError("nodes " + describe(*byRank[want]) + " and " + describe(record) +
                        " both asked for node rank " + std::to_string(want));
    }
    byRank[want] = std::move(record);
  }
  auto order = [](const JoinRecord& r) {
    return std::make_tuple(r.prevRank < 0 ? INT_MAX : r.prevRank, r.node.host, r.node.addr,
                           r.node.pid, r.slot);
  };
  std::sort(unranked.begin(), unranked.end(),
            [&](const JoinRecord& a, const JoinRecord& b) { return order(a) < order(b); });
  std::vector<JoinRecord> ordered;
  ordered.reserve(n);
  size_t next = 0;
  for (auto& slot : byRank) ordered.push_back(slot ? std::move(*slot) : std::move(unranked[next++]));
  return ordered;
}

RendezvousResult resultFor(const RoundMembership& m, int64_t slot) {
  if (!m.error.empty()) throw ConfigError(m.error);
  RendezvousResult result;
  result.generation = m.generation;
  result.restartsUsed = m.restartsUsed;
  result.nodeCount = static_cast<int>(m.members.size());
  result.worldSize = 0;
  std::map<std::string, int> roleSize;
  int mine = -1;
  for (int rank = 0; rank < result.nodeCount; ++rank) {
    const JoinRecord& record = m.members[rank];
    if (record.slot == slot) {
      mine = rank;
      result.baseRank = result.worldSize;
      result.baseRoleRank = roleSize[record.node.role];
    }
    result.members.push_back(RendezvousMember{rank, result.worldSize, record.node});
    result.worldSize += record.node.localWorldSize;
    roleSize[record.node.role] += record.node.localWorldSize;
  }
  if (mine < 0) {
    throw Error("join slot " + std::to_string(slot) + " is not a member of round " +
                std::to_string(m.generation));
  }
  result.nodeRank = mine;
  result.roleWorldSize = roleSize[m.members[mine].node.role];
  return result;
}

}  // namespace ddp::detail
