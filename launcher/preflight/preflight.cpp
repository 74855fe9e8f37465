#include "launcher/preflight/preflight.hpp"

#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>

#include "launcher/preflight/preflight_probe.hpp"

namespace ddp {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

constexpr const char* kReady = "preflight-ready";
constexpr const char* kClock = "preflight-clock";
constexpr const char* kReport = "preflight-report";
constexpr const char* kVerdict = "preflight-verdict";

std::vector<int> otherRanks(const RendezvousResult& round) {
  std::vector<int> ranks(static_cast<size_t>(std::max(round.nodeCount - 1, 0)));
  std::iota(ranks.begin(), ranks.end(), 1);
  return ranks;
}

// The clock offset of a follower from what it measured (see the header): nullopt when the leader
// did not see this node's ready in time, or its record is unreadable.
std::optional<ClockOffset> offsetFrom(const std::string& clockRecord, int nodeRank,
                                      int64_t wallAtReturn, Clock::duration waited) {
  try {
    const json j = json::parse(clockRecord);
    const auto late = j.at("late").get<std::vector<int>>();
    if (std::find(late.begin(), late.end(), nodeRank) != late.end()) return std::nullopt;
    const int64_t leaderWall = j.at("wall_ms").get<int64_t>();
    const int64_t interval = std::chrono::ceil<std::chrono::milliseconds>(waited).count();
    // +1: both wall clocks are read in whole milliseconds.
    return ClockOffset{wallAtReturn - leaderWall - interval / 2, (interval + 1) / 2 + 1};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

PreflightSettings preflightSettingsFrom(const LaunchConfig& config, const std::string& host,
                                        const std::string& addr) {
  PreflightSettings s;
  s.mode = config.preflight;
  s.host = host;
  s.addr = addr;
  s.workers = config.nprocPerNode;
  s.pythonExec = pythonOf(config);
  s.checkpointPlace = checkpointPlace(config);
  return s;
}

Preflight::Preflight(PreflightSettings settings, EnvLookup getenv)
    : settings_(std::move(settings)),
      getenv_(std::move(getenv)),
      clockOffset_(testClockOffset(getenv_)),
      log_(logger("agent")) {
  if (settings_.mode == PreflightMode::kOff) return;
  if (auto spec = getenv_("DDP_TEST_FINGERPRINT")) {
    NodeFingerprint check;
    applyTestFingerprint(*spec, check);  // a malformed value fails at start-up, not mid-round
    testFingerprint_ = *spec;
  }
  fingerprint_ = std::async(std::launch::async, [getenv = getenv_] {
                   return probeFingerprint(getenv);
                 }).share();
  if (!settings_.pythonExec.empty()) {
    torch_ = std::async(std::launch::async, [python = settings_.pythonExec,
                                             timeout = settings_.torchTimeout] {
               return probeTorch(python, timeout);
             }).share();
  }
}

Preflight::~Preflight() {
  if (fingerprint_.valid()) fingerprint_.wait();
  if (torch_.valid()) torch_.wait();
}

NodeReport Preflight::localReport(const std::string& storeAddr, uint16_t storePort,
                                  bool waitTorch) {
  NodeReport r;
  r.host = settings_.host;
  r.addr = settings_.addr;
  r.workers = settings_.workers;
  r.port = probePort(storeAddr, storePort, settings_.portTimeout);
  r.fingerprint = fingerprint_.get();
  if (torch_.valid()) {
    const bool ready = torch_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    r.fingerprint.torch = waitTorch || ready ? torch_.get() : "probing";
  }
  applyTestFingerprint(testFingerprint_, r.fingerprint);
  r.diskPath = settings_.checkpointPlace;
  r.diskFreeBytes = freeDiskBytes(settings_.checkpointPlace);
  return r;
}

PreflightOutcome Preflight::run(Rendezvous& rdzv, const RendezvousResult& round,
                                const std::string& storeAddr, uint16_t storePort) {
  if (settings_.mode == PreflightMode::kOff) return PreflightPassed{};
  if (round.nodeRank != 0) return follow(rdzv, round, storeAddr, storePort);
  std::vector<int> late;
  if (round.nodeCount > 1) {
    auto ready = rdzv.roundRecords(kReady, otherRanks(round), settings_.leaderWait);
    if (auto* e = std::get_if<RoundEnded>(&ready)) return *e;
    const auto& got = std::get<RoundRecords>(ready);
    for (size_t i = 0; i < got.size(); ++i) {
      if (!got[i]) late.push_back(static_cast<int>(i) + 1);
    }
    // Read after every ready was seen (or given up on): see the header's clock argument.
    rdzv.publishRoundRecord(kClock, json{{"wall_ms", wallClockMs(clockOffset_)}, {"late", late}}.dump());
  }
  return lead(rdzv, round, localReport(storeAddr, storePort, round.nodeCount > 1));
}

PreflightOutcome Preflight::lead(Rendezvous& rdzv, const RendezvousResult& round,
                                 const NodeReport& own) {
  std::vector<std::optional<NodeReport>> reports{own};
  if (round.nodeCount > 1) {
    auto got = rdzv.roundRecords(kReport, otherRanks(round), settings_.leaderWait);
    if (auto* e = std::get_if<RoundEnded>(&got)) return *e;
    for (const auto& value : std::get<RoundRecords>(got)) {
      reports.emplace_back();
      if (!value) continue;
      try {
        reports.back() = reportFromJson(*value);
      } catch (const ProtocolError& e) {
        log_->warn("preflight: node {}'s report is unreadable ({}); counted as missing",
                   reports.size() - 1, e.what());
      }
    }
  }
  const auto flags = evaluatePreflight(reports, {settings_.clockLimit, settings_.leaderWait});
  const std::string table = formatPreflightTable(round.generation, reports, flags);
  flags.empty() ? log_->info("{}", table) : log_->warn("{}", table);
  PreflightVerdict verdict{settings_.mode == PreflightMode::kStrict && !flags.empty(),
                           static_cast<int>(flags.size()), "", blamedNodes(flags)};
  if (!flags.empty()) verdict.firstFlag = std::string(checkName(flags[0].check)) + ": " + flags[0].line;
  if (round.nodeCount > 1) rdzv.publishRoundRecord(kVerdict, toJson(verdict));
  if (verdict.failed) return PreflightFailed{verdict.firstFlag, verdict.blamed};
  return PreflightPassed{};
}

PreflightOutcome Preflight::follow(Rendezvous& rdzv, const RendezvousResult& round,
                                   const std::string& storeAddr, uint16_t storePort) {
  const auto asked = Clock::now();
  rdzv.publishRoundRecord(kReady, "1");
  auto clock = rdzv.roundRecords(kClock, {0}, settings_.followerWait);
  const auto answered = Clock::now();
  const int64_t wall = wallClockMs(clockOffset_);
  if (auto* e = std::get_if<RoundEnded>(&clock)) return *e;
  const auto& clockRecord = std::get<RoundRecords>(clock)[0];
  if (!clockRecord) return withoutLeader("sent no preflight clock");
  NodeReport report = localReport(storeAddr, storePort, true);
  report.clock = offsetFrom(*clockRecord, round.nodeRank, wall, answered - asked);
  rdzv.publishRoundRecord(kReport, toJson(report));
  auto got = rdzv.roundRecords(kVerdict, {0}, settings_.followerWait);
  if (auto* e = std::get_if<RoundEnded>(&got)) return *e;
  const auto& value = std::get<RoundRecords>(got)[0];
  if (!value) return withoutLeader("published no preflight verdict");
  PreflightVerdict verdict;
  try {
    verdict = verdictFromJson(*value);
  } catch (const ProtocolError& e) {
    return withoutLeader(std::string("published an unreadable verdict (") + e.what() + ")");
  }
  if (verdict.failed) return PreflightFailed{verdict.firstFlag, verdict.blamed};
  if (verdict.flags > 0) {
    log_->warn("preflight of generation {}: {} flag(s), the first: {} (node rank 0 prints the "
               "table)", round.generation, verdict.flags, verdict.firstFlag);
  }
  return PreflightPassed{};
}

PreflightOutcome Preflight::withoutLeader(const std::string& what) const {
  const std::string line = "node rank 0 " + what + " within " +
                           std::to_string(settings_.followerWait.count()) +
                           " ms (is --preflight off there? every node needs the same setting)";
  if (settings_.mode == PreflightMode::kStrict) return PreflightFailed{"missing: " + line, {}};
  log_->warn("preflight: {}; going on without the checks", line);
  return PreflightPassed{};
}

}  // namespace ddp
