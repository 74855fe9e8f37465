#include "launcher/rendezvous/store_failover.hpp"

#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "launcher/rendezvous/store_failover_exchange.hpp"
#include "rendezvous/base/logging.hpp"

namespace ddp {
namespace {

// The owner and host keys of an agent-hosted store; nullopt when either is missing.
std::optional<std::pair<std::string, AgentId>> ownerAndHost(Store& store) {
  const std::vector<std::string> keys = {rendezvousOwnerKey(), rendezvousHostKey()};
  if (!store.check(keys)) return std::nullopt;
  const auto values = store.multiGet(keys);
  auto host = parseAgentId(values[1]);
  if (!host) return std::nullopt;
  return std::make_pair(values[0], *host);
}

std::string describe(const Standby& s) {
  return "node rank " + std::to_string(s.nodeRank) + " (" + s.agent.host + ", pid " +
         std::to_string(s.agent.pid) + ")";
}

const std::string kStandbyRecord = "standby";

AgentId thisAgent() {
  const auto id = parseAgentId(thisAgentId());
  return id.value_or(AgentId{});
}

}  // namespace

std::optional<AgentId> parseAgentId(const std::string& text) {
  const auto bar = text.rfind('|');
  if (bar == std::string::npos || bar == 0) return std::nullopt;
  AgentId id{text.substr(0, bar), 0};
  const char* first = text.data() + bar + 1;
  const char* last = text.data() + text.size();
  const auto parsed = std::from_chars(first, last, id.pid);
  if (parsed.ec != std::errc() || parsed.ptr != last || id.pid <= 0) return std::nullopt;
  return id;
}

std::string encodeStandby(const NodeDescriptor& self) {
  return self.host + "|" + std::to_string(self.pid) + "|" + self.addr;
}

std::optional<Standby> decodeStandby(int nodeRank, const std::string& value) {
  const auto last = value.rfind('|');
  if (last == std::string::npos || last + 1 == value.size()) return std::nullopt;
  auto agent = parseAgentId(value.substr(0, last));
  if (!agent) return std::nullopt;
  return Standby{nodeRank, *agent, value.substr(last + 1)};
}

void publishStandby(Rendezvous& rdzv, const RendezvousResult& round, const NodeDescriptor& self) {
  if (round.nodeRank < kStandbyCandidates) rdzv.publishRoundRecord(kStandbyRecord, encodeStandby(self));
}

std::variant<std::vector<Standby>, RoundEnded> readStandbys(Rendezvous& rdzv,
                                                            const RendezvousResult& round,
                                                            std::chrono::milliseconds timeout) {
  std::vector<int> ranks;
  for (int r = 0; r < std::min(round.nodeCount, kStandbyCandidates); ++r) ranks.push_back(r);
  auto got = rdzv.roundRecords(kStandbyRecord, ranks, timeout);
  if (auto* ended = std::get_if<RoundEnded>(&got)) return *ended;
  std::vector<Standby> out;
  const auto& values = std::get<RoundRecords>(got);
  for (size_t i = 0; i < values.size(); ++i) {
    if (!values[i]) continue;
    if (auto standby = decodeStandby(ranks[i], *values[i])) out.push_back(std::move(*standby));
  }
  return out;
}

std::vector<Standby> successionOrder(std::vector<Standby> standbys,
                                     const std::optional<AgentId>& deadHost) {
  std::stable_sort(standbys.begin(), standbys.end(),
                   [](const auto& a, const auto& b) { return a.nodeRank < b.nodeRank; });
  if (deadHost) {
    std::erase_if(standbys, [&](const Standby& s) { return s.agent == *deadHost; });
  }
  return standbys;
}

std::chrono::milliseconds failoverBound(const RendezvousSettings& s) {
  const auto heartbeat = s.heartbeatTimeout.count() > 0
                             ? s.heartbeatTimeout
                             : s.keepAliveInterval * std::max(1, s.keepAliveMaxAttempt);
  return 2 * heartbeat + s.keepAliveInterval;
}

StoreFailover::StoreFailover(const LaunchConfig& config)
    : config_(config), self_(thisAgent()), log_(logger("agent")) {}

void StoreFailover::learnHost(const RendezvousStoreHandle& handle) {
  host_.reset();
  if (handle.server || handle.endpointPort == 0 || handle.description.starts_with("etcd")) return;
  try {
    const auto found = ownerAndHost(*handle.store);
    if (!found || found->first != config_.rdzvId || found->second == self_) return;
    host_ = found->second;
    port_ = handle.endpointPort;
    log_->debug("the rendezvous store is hosted by the agent {} (pid {}): it moves to a survivor "
                "if that agent dies", host_->host, host_->pid);
  } catch (const Error& e) {
    log_->debug("who hosts the rendezvous store is unknown ({}): no failover", e.what());
  }
}

bool StoreFailover::stillAnswers(const RendezvousStoreHandle& lost) const {
  const auto budget = std::min<std::chrono::milliseconds>(config_.rdzv.keepAliveInterval,
                                                          std::chrono::seconds(1));
  try {
    auto probe = connectRendezvousStore(config_, lost.endpointHost, lost.endpointPort, budget);
    const auto found = ownerAndHost(*probe.store);
    return found && found->second == *host_;
  } catch (const Error&) {
    return false;
  }
}

RendezvousStoreHandle StoreFailover::failOver(const JobSnapshot& snapshot,
                                              const RendezvousStoreHandle& lost,
                                              const std::string& why) {
  if (!host_) throw NetworkError(why);
  const AgentId dead = *host_;
  if (stillAnswers(lost)) {
    throw NetworkError(why + " (the rendezvous store at " + lost.description +
                       " still answers: this node's connection broke, the store stays)");
  }
  const auto order = successionOrder(standbys_, dead);
  log_->warn("lost the rendezvous store hosted by the agent {} (pid {}): {}; moving it to the "
             "lowest surviving node of generation {} ({} candidate(s))",
             dead.host, dead.pid, why, snapshot.generation, order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const int expected = static_cast<int>(order.size() - 1 - i);
    if (order[i].agent == self_) return host(snapshot, expected);
    if (auto handle = follow(order[i], snapshot, expected)) return std::move(*handle);
  }
  throw NetworkError(why + "; no node on the standby list of generation " +
                     std::to_string(snapshot.generation) +
                     " could take over the rendezvous store (this node read no standby list, or "
                     "none answered on port " + std::to_string(port_) + ")");
}

RendezvousStoreHandle StoreFailover::host(const JobSnapshot& snapshot, int expected) {
  StoreKeyValues keys = seedKeys(snapshot);
  keys.emplace_back(rendezvousOwnerKey(), config_.rdzvId);
  keys.emplace_back(rendezvousHostKey(), thisAgentId());
  RendezvousStoreHandle handle = hostRendezvousStore(config_, port_, std::move(keys));
  log_->warn("this node hosts the rendezvous store now (port {}); waiting up to {} ms for {} "
             "other survivor(s) to report", port_, failoverBound(config_.rdzv).count(), expected);
  const JobSnapshot merged =
      seedFromReports(*handle.store, snapshot, expected, failoverBound(config_.rdzv));
  log_->info("rendezvous store seeded: run id {}, incarnation {}, next round {}, {} restart(s) "
             "spent, {} failure record(s)", merged.runId, merged.incarnation,
             merged.generation + 1, merged.restartsUsed, merged.failureRecords.size());
  host_.reset();  // this agent hosts it: nothing to fail over to
  return handle;
}

std::optional<RendezvousStoreHandle> StoreFailover::follow(const Standby& successor,
                                                           const JobSnapshot& snapshot,
                                                           int expected) {
  const auto bound = failoverBound(config_.rdzv);
  const std::string where = successor.addr + ":" + std::to_string(port_);
  std::optional<RendezvousStoreHandle> handle;
  try {
    handle.emplace(connectRendezvousStore(config_, successor.addr, port_, bound));
  } catch (const Error& e) {  // TimeoutError, NetworkError: nobody listens there
    log_->warn("{} did not answer at {} within {} ms ({}); taking it as lost, trying the next node",
               describe(successor), where, bound.count(), e.what());
    return std::nullopt;
  }
  const auto found = ownerAndHost(*handle->store);
  if (!found || found->first != config_.rdzvId) {
    log_->warn("{} at {} serves no rendezvous store of run {}; trying the next node",
               describe(successor), where, config_.rdzvId);
    return std::nullopt;
  }
  log_->warn("the rendezvous store moved to {} (the agent {}, pid {}); reporting this node's state",
             where, found->second.host, found->second.pid);
  reportToNewHost(*handle->store, snapshot, expected, 2 * bound);
  host_ = found->second;
  handle->description = where + " (moved from the lost host)";
  return handle;
}

}  // namespace ddp
