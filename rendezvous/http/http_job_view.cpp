#include "rendezvous/http/http_job_view.hpp"

#include <charconv>
#include <cmath>

#include "rendezvous/algorithm/detail/rendezvous_assign.hpp"
#include "rendezvous/algorithm/detail/rendezvous_keys.hpp"
#include "rendezvous/http/http_steps.hpp"

namespace ddp {
namespace {

using nlohmann::json;

std::optional<int64_t> number(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  int64_t value = 0;
  const auto r = std::from_chars(text->data(), text->data() + text->size(), value);
  if (r.ec != std::errc() || r.ptr != text->data() + text->size()) return std::nullopt;
  return value;
}

void readNodes(KeySource& source, const detail::RendezvousKeys& keys, int64_t g, JobView& job) {
  // The roster (every member, written once by the round's closer); r/<g>/result is only the
  // round's header.
  const auto roster = source.get(keys.roster(g));
  if (!roster) return;  // deleted meanwhile
  detail::RoundMembership membership;
  try {
    membership = detail::decodeMembership(*roster);
  } catch (const std::exception& e) {
    job.problems.push_back(std::string("round roster: ") + e.what());
    return;
  }
  if (!membership.error.empty()) job.problems.push_back("round " + std::to_string(g) + ": " +
                                                        membership.error);
  for (std::size_t rank = 0; rank < membership.members.size(); ++rank) {
    const auto& member = membership.members[rank];
    NodeView node;
    node.rank = static_cast<int>(rank);
    node.host = member.node.host;
    node.addr = member.node.addr;
    node.agentPid = member.node.pid;
    node.localWorldSize = member.node.localWorldSize;
    const std::string hbKey = keys.heartbeat(g, node.rank);
    if (const auto hb = source.get(hbKey)) {
      node.heartbeats = number(hb);
      node.heartbeatAgeS = source.secondsSinceChange(hbKey, *hb);
    }
    if (const auto status = source.get(keys.status(g, node.rank))) {
      node.status = json::parse(*status, nullptr, false);
      if (node.status.is_discarded() || !node.status.is_object()) node.status = nullptr;
      if (node.status.contains("max_restarts") && node.status["max_restarts"].is_number()) {
        job.maxRestarts = node.status["max_restarts"].get<int>();
      }
    }
    job.nodes.push_back(std::move(node));
  }
}

void readRound(KeySource& source, const detail::RendezvousKeys& keys, JobView& job) {
  job.generation = number(source.get(keys.formed()));
  if (!job.generation) {
    // No round formed yet: how many agents joined the open one.
    if (const auto round = number(source.get(keys.round()))) {
      int64_t joined = number(source.get(keys.count(*round))).value_or(0);
      if (joined >= detail::kFrozen) joined -= detail::kFrozen;
      job.joining = static_cast<int>(joined);
    }
    return;
  }
  const int64_t g = *job.generation;
  readNodes(source, keys, g, job);
  if (const auto end = source.get(keys.end(g))) {
    const auto decoded = detail::decodeRoundEnd(*end);
    job.roundEnd = endName(decoded.kind);
    job.roundEndDetail = decoded.detail;
  }
}

void readRecords(KeySource& source, const detail::RendezvousKeys& keys, JobView& job) {
  if (const auto history = source.get(keys.history())) job.history = parseJsonLines(*history);
  if (const auto points = source.get(keys.metrics())) job.points = parseJsonLines(*points);
  if (const auto excluded = source.get(keys.exclusions())) job.exclusions = parseJsonLines(*excluded);
  job.exclusionCount = number(source.get(keys.exclusionCount())).value_or(0);
  const auto failures = source.get(keys.failures());
  if (!failures) return;
  try {
    for (const auto& record : detail::unframeRecords(*failures)) {
      json parsed = json::parse(record, nullptr, false);
      if (!parsed.is_discarded()) job.failures.push_back(std::move(parsed));
    }
  } catch (const std::exception& e) {
    job.problems.push_back(std::string("failure records: ") + e.what());
  }
}

json nodeJson(const NodeView& n) {
  json age = n.heartbeatAgeS ? json(std::round(*n.heartbeatAgeS * 1000) / 1000) : json(nullptr);
  return {{"rank", n.rank}, {"host", n.host}, {"addr", n.addr}, {"agent_pid", n.agentPid},
          {"local_world_size", n.localWorldSize},
          {"heartbeats", n.heartbeats ? json(*n.heartbeats) : json(nullptr)},
          {"heartbeat_age_s", age}, {"status", n.status}};
}

// The failure records of workers replaced in place (their "quorum" is >= 0), oldest first: one
// entry per record, for the status page's recovery timeline and /metrics.
json recoveriesOf(const JobView& j) {
  json out = json::array();
  for (const auto& r : j.failures) {
    if (!r.is_object() || r.value("quorum", int64_t(-1)) < 0) continue;
    json ranks = json::array(), how = json::array();
    for (const auto& f : r.value("failures", json::array())) {
      if (!f.is_object()) continue;
      ranks.push_back(f.value("global_rank", -1));
      const int signal = f.value("signal", 0);
      how.push_back(!f.value("hang", std::string()).empty() ? std::string("hung")
                    : signal != 0 ? "signal " + std::to_string(signal)
                                  : "exit " + std::to_string(f.value("exit_code", 0)));
    }
    out.push_back({{"generation", r.value("generation", int64_t(-1))},
                   {"quorum", r.value("quorum", int64_t(-1))},
                   {"node_rank", r.value("node_rank", -1)},
                   {"host", r.value("host", std::string())},
                   {"ranks", ranks},
                   {"how", how}});
  }
  return out;
}

json jobJson(const JobView& j) {
  json nodes = json::array();
  for (const auto& n : j.nodes) nodes.push_back(nodeJson(n));
  json ended = nullptr;
  if (j.ended) {
    ended = {{"succeeded", j.ended->succeeded}, {"unix_ms", j.ended->unixMs},
             {"generation", j.ended->generation}, {"reason", j.ended->reason}};
  }
  return {{"run_id", j.runId},
          {"incarnation", j.incarnation},
          {"state", j.state},
          {"generation", j.generation ? json(*j.generation) : json(nullptr)},
          {"restarts_used", j.restartsUsed},
          {"max_restarts", j.maxRestarts ? json(*j.maxRestarts) : json(nullptr)},
          {"joining", j.joining},
          {"ended", ended},
          {"round_end", j.roundEnd ? json(*j.roundEnd) : json(nullptr)},
          {"round_end_detail", j.roundEndDetail},
          {"nodes", nodes},
          {"history", j.history},
          {"failures", j.failures},
          {"recoveries", recoveriesOf(j)},
          {"exclusions", j.exclusions},
          {"exclusion_count", j.exclusionCount},
          {"nodes_excluded", j.nodesExcluded()},
          {"points", j.points},
          {"problems", j.problems}};
}

// jobJson with the straggler fields (http_steps.hpp).
json jobJsonWithSteps(const JobView& j) {
  json out = jobJson(j);
  out.update(stepStatusJson(j));
  return out;
}

}  // namespace

int64_t JobView::nodesExcluded() const {
  int64_t out = 0;
  for (const auto& e : exclusions) {
    if (e.is_object() && e.value("returned_at", int64_t(0)) < 0) ++out;
  }
  return out;
}

json parseJsonLines(const std::string& text) {
  json out = json::array();
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    json line = json::parse(text.begin() + static_cast<std::ptrdiff_t>(pos),
                            text.begin() + static_cast<std::ptrdiff_t>(eol), nullptr, false);
    if (!line.is_discarded() && line.is_object()) out.push_back(std::move(line));
    pos = eol + 1;
  }
  return out;
}

JobView readJob(KeySource& source, const std::string& runId) {
  JobView job;
  job.runId = runId;
  job.incarnation = number(source.get(detail::RendezvousKeys::incarnationOf(runId))).value_or(0);
  const detail::RendezvousKeys keys(runId, job.incarnation);
  if (const auto ended = source.get(keys.ended())) {
    const auto end = detail::decodeJobEnd(*ended);
    job.ended = JobView::Ended{end.succeeded, end.unixMs, end.generation, end.reason};
  }
  job.restartsUsed = number(source.get(keys.restarts())).value_or(0);
  readRound(source, keys, job);
  readRecords(source, keys, job);
  if (job.ended) {
    job.state = job.ended->succeeded ? "succeeded" : "failed";
    if (!job.generation && job.ended->generation >= 0) job.generation = job.ended->generation;
  } else if (job.generation) {
    job.state = job.roundEnd ? "restarting" : "running";
  }
  return job;
}

int64_t JobView::recoveriesInPlace() const {
  int64_t n = 0;
  for (const auto& r : failures) {
    if (r.is_object() && r.value("quorum", int64_t(-1)) >= 0) ++n;
  }
  return n;
}

json statusJson(const std::vector<JobView>& jobs, const json& server) {
  json list = json::array();
  for (const auto& j : jobs) list.push_back(jobJsonWithSteps(j));
  json out = {{"jobs", list}};
  if (!server.is_null()) out["server"] = server;
  return out;
}

}  // namespace ddp
