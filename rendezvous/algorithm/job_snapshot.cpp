#include "rendezvous/algorithm/job_snapshot.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"

namespace ddp {

JobSnapshot mergeSnapshots(JobSnapshot a, const JobSnapshot& b) {
  if (b.incarnation < 0 || (a.incarnation >= 0 && b.runId != a.runId)) return a;
  if (a.incarnation < b.incarnation) return b;
  if (b.incarnation < a.incarnation) return a;
  a.generation = std::max(a.generation, b.generation);
  a.restartsUsed = std::max(a.restartsUsed, b.restartsUsed);
  std::set<std::string> seen(a.failureRecords.begin(), a.failureRecords.end());
  for (const auto& record : b.failureRecords) {
    if (seen.insert(record).second) a.failureRecords.push_back(record);
  }
  return a;
}

StoreKeyValues seedKeys(const JobSnapshot& s) {
  if (s.incarnation < 0) return {};
  const detail::RendezvousKeys keys(s.runId, s.incarnation);
  const std::string next = std::to_string(std::max<int64_t>(s.generation + 1, 0));
  StoreKeyValues out = {{detail::RendezvousKeys::incarnationOf(s.runId),
                         std::to_string(s.incarnation)},
                        {keys.round(), next},
                        {keys.low(), next},
                        {keys.restarts(), std::to_string(s.restartsUsed)}};
  if (!s.failureRecords.empty()) {
    std::string framed;
    for (const auto& record : s.failureRecords) framed += detail::frameRecord(record);
    out.emplace_back(keys.failures(), framed);
  }
  return out;
}

std::string encodeSnapshot(const JobSnapshot& s) {
  std::string out = std::to_string(s.incarnation) + " " + std::to_string(s.generation) + " " +
                    std::to_string(s.restartsUsed) + " " + std::to_string(s.runId.size()) + "\n" +
                    s.runId;
  for (const auto& record : s.failureRecords) out += detail::frameRecord(record);
  return out;
}

JobSnapshot decodeSnapshot(const std::string& value) {
  const auto newline = value.find('\n');
  std::istringstream head(value.substr(0, newline));
  JobSnapshot s;
  size_t idLength = 0;
  if (newline == std::string::npos || !(head >> s.incarnation >> s.generation >> s.restartsUsed >>
                                        idLength) ||
      newline + 1 + idLength > value.size()) {
    throw ProtocolError("a store failover report is malformed: '" + value.substr(0, 64) + "'");
  }
  s.runId = value.substr(newline + 1, idLength);
  s.failureRecords = detail::unframeRecords(value.substr(newline + 1 + idLength));
  return s;
}

std::string rendezvousHostKey() { return "rdzv/_host"; }

}  // namespace ddp
