#include "rendezvous/algorithm/detail/rendezvous_plan.hpp"

#include <string_view>
#include <unordered_map>

#include "rendezvous/algorithm/detail/rendezvous_text.hpp"

namespace ddp::detail {

namespace {

constexpr const char* kWhat = "round assignment";

void appendHeader(std::string& out, const RoundHeader& h) {
  out += std::to_string(h.generation) + '\t' + std::to_string(h.restartsUsed) + '\t' +
         std::to_string(h.nodeCount) + '\t' + std::to_string(h.worldSize) + '\t' +
         escapeField(h.error) + '\n';
}

RoundHeader parseHeader(std::string_view line) {
  const auto f = splitFields(line, 5, kWhat);
  RoundHeader h;
  h.generation = parseField<int64_t>(f[0], kWhat);
  h.restartsUsed = parseField<int>(f[1], kWhat);
  h.nodeCount = parseField<int>(f[2], kWhat);
  h.worldSize = parseField<int>(f[3], kWhat);
  h.error = unescapeField(f[4]);
  return h;
}

Placement parsePlacement(std::string_view text, size_t& pos) {
  const auto f = splitFields(nextLine(text, pos, kWhat), 4, kWhat);
  Placement p;
  p.nodeRank = parseField<int>(f[0], kWhat);
  p.baseRank = parseField<int>(f[1], kWhat);
  p.baseRoleRank = parseField<int>(f[2], kWhat);
  p.roleWorldSize = parseField<int>(f[3], kWhat);
  while (pos < text.size()) {
    const auto peer = splitFields(nextLine(text, pos, kWhat), 3, kWhat);
    p.watched.push_back(PeerHost{parseField<int>(peer[0], kWhat), unescapeField(peer[1]),
                                 parseField<int64_t>(peer[2], kWhat)});
  }
  return p;
}

}  // namespace

std::vector<int> watchedBy(int rank, int nodeCount) {
  std::vector<int> ranks;
  if (nodeCount < 2) return ranks;
  if (rank == 0) {
    for (int r = 1; r < nodeCount; ++r) ranks.push_back(r);
  } else {
    ranks.push_back((rank + 1) % nodeCount);
  }
  return ranks;
}

std::string encodeAssignment(const Assignment& a) {
  std::string out;
  appendHeader(out, a.header);
  if (!a.member) return out;
  const Placement& p = *a.member;
  out += std::to_string(p.nodeRank) + '\t' + std::to_string(p.baseRank) + '\t' +
         std::to_string(p.baseRoleRank) + '\t' + std::to_string(p.roleWorldSize) + '\n';
  for (const auto& peer : p.watched) {
    out += std::to_string(peer.rank) + '\t' + escapeField(peer.host) + '\t' +
           std::to_string(peer.slot) + '\n';
  }
  return out;
}

Assignment decodeAssignment(const std::string& value) {
  const std::string_view text(value);
  size_t pos = 0;
  Assignment a;
  a.header = parseHeader(nextLine(text, pos, kWhat));
  if (pos < text.size()) a.member = parsePlacement(text, pos);
  return a;
}

RoundPlan planRound(const RoundMembership& roster) {
  RoundPlan plan;
  plan.header = RoundHeader{roster.generation, roster.restartsUsed,
                            static_cast<int>(roster.members.size()), 0, roster.error};
  if (!roster.error.empty()) return plan;
  std::unordered_map<std::string, int> roleSize;
  const int n = plan.header.nodeCount;
  plan.bySlot.reserve(roster.members.size());
  for (int rank = 0; rank < n; ++rank) {
    const NodeDescriptor& node = roster.members[rank].node;
    int& roleBase = roleSize[node.role];
    Placement p{rank, plan.header.worldSize, roleBase, 0, {}};
    for (int peer : watchedBy(rank, n)) {
      p.watched.push_back({peer, roster.members[peer].node.host, roster.members[peer].slot});
    }
    plan.bySlot.emplace_back(roster.members[rank].slot, Assignment{{}, std::move(p)});
    plan.header.worldSize += node.localWorldSize;
    roleBase += node.localWorldSize;
  }
  for (int rank = 0; rank < n; ++rank) {
    Assignment& a = plan.bySlot[rank].second;
    a.header = plan.header;
    a.member->roleWorldSize = roleSize[roster.members[rank].node.role];
  }
  return plan;
}

RendezvousResult resultOf(const Assignment& a) {
  if (!a.header.error.empty()) throw ConfigError(a.header.error);
  if (!a.member) {
    throw Error("this node is no member of round " + std::to_string(a.header.generation));
  }
  const Placement& p = *a.member;
  RendezvousResult r;
  r.generation = a.header.generation;
  r.restartsUsed = a.header.restartsUsed;
  r.nodeRank = p.nodeRank;
  r.nodeCount = a.header.nodeCount;
  r.baseRank = p.baseRank;
  r.worldSize = a.header.worldSize;
  r.baseRoleRank = p.baseRoleRank;
  r.roleWorldSize = p.roleWorldSize;
  return r;
}

}  // namespace ddp::detail
