#include "launcher/status/node_status.hpp"

#include <sys/wait.h>

#include <algorithm>

#include <nlohmann/json.hpp>

namespace ddp {
namespace {

using nlohmann::json;

constexpr std::size_t kMessageChars = 200;

std::string firstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > kMessageChars) line = line.substr(0, kMessageChars) + "...";
  return line;
}

json workerJson(const WorkerState& w) {
  json exitCode = nullptr, signal = nullptr;
  if (w.exited && WIFEXITED(w.status)) exitCode = WEXITSTATUS(w.status);
  if (w.exited && WIFSIGNALED(w.status)) signal = signalName(WTERMSIG(w.status));
  return {{"local_rank", w.localRank}, {"rank", w.rank}, {"pid", w.pid},
          {"state", workerStateName(w)}, {"exit_code", exitCode}, {"signal", signal}};
}

}  // namespace

std::string workerStateName(const WorkerState& w) {
  if (!w.exited) return "running";
  if (WIFEXITED(w.status) && WEXITSTATUS(w.status) == 0) return "succeeded";
  return w.stoppedByAgent ? "stopped" : "failed";
}

std::string nodeStatusJson(const NodeStatus& s) {
  json workers = json::array();
  for (std::size_t i = 0; i < s.workers.size() && i < kMaxListedWorkers; ++i) {
    workers.push_back(workerJson(s.workers[i]));
  }
  json record{{"v", 1},
              {"generation", s.generation},
              {"node_rank", s.nodeRank},
              {"nodes", s.nodeCount},
              {"world_size", s.worldSize},
              {"host", s.host},
              {"agent_pid", s.agentPid},
              {"max_restarts", s.maxRestarts},
              {"restarts_used", s.restartsUsed},
              {"ended", s.ended.empty() ? json(nullptr) : json(s.ended)},
              {"workers", workers}};
  if (s.steps) addStepFields(record, *s.steps, s.nodeRank == 0);
  return record.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string describeFailure(const WorkerFailure& f) {
  std::string text = "rank " + std::to_string(f.rank) + " on " + f.host + " (pid " +
                     std::to_string(f.pid) + ") " +
                     (f.signal != 0 ? "was killed by " + signalName(f.signal)
                                    : "exited with " + std::to_string(f.exitCode));
  if (!f.message.empty()) text += ": " + firstLine(f.message);
  return text;
}

std::string historyEntryJson(const GenerationEnd& end, const std::vector<FailureRecord>& records) {
  std::vector<FailureRecord> mine;
  for (const auto& r : records) {
    if (r.generation == end.generation) mine.push_back(r);
  }
  json rootCause = nullptr;
  const FailureSummary summary = summarize(mine);
  if (!summary.empty) rootCause = describeFailure(summary.rootCause);
  return json{{"generation", end.generation}, {"nodes", end.nodes}, {"workers", end.workers},
              {"restarts_used", end.restartsUsed}, {"end", end.how}, {"detail", end.detail},
              {"root_cause", rootCause}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

namespace {

// The entries of `history` that parse, with their generations, in the order found.
std::vector<std::pair<int64_t, std::string>> historyLines(const std::string& history) {
  std::vector<std::pair<int64_t, std::string>> out;
  for (auto& line : splitLines(history)) {
    const json parsed = json::parse(line, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) continue;
    out.emplace_back(parsed.value("generation", int64_t{-1}), std::move(line));
  }
  return out;
}

}  // namespace

std::string appendHistory(const std::string& history, const std::string& entry) {
  const int64_t generation = json::parse(entry)["generation"].get<int64_t>();
  auto lines = historyLines(history);
  std::erase_if(lines, [&](const auto& line) { return line.first == generation; });
  lines.emplace_back(generation, entry);
  // Oldest first also when an older generation's entry comes late (a node filling a gap).
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::deque<std::string> kept;
  for (auto& line : lines) kept.push_back(std::move(line.second));
  while (kept.size() > kHistoryEntries) kept.pop_front();
  return joinLines(kept);
}

bool historyHas(const std::string& history, int64_t generation) {
  const auto lines = historyLines(history);
  return std::any_of(lines.begin(), lines.end(),
                     [&](const auto& line) { return line.first == generation; });
}

std::optional<std::string> ringPoint(const std::string& point, int64_t generation) {
  const json parsed = json::parse(point, nullptr, false);
  if (parsed.is_discarded() || !parsed.is_object()) return std::nullopt;
  json kept = {{"gen", generation}};
  for (const char* field : {"n", "step", "epoch", "loss", "lr", "samples_per_s", "time"}) {
    if (parsed.contains(field) && parsed[field].is_number()) kept[field] = parsed[field];
  }
  return kept.dump();
}

void pushRing(std::deque<std::string>& ring, std::string line) {
  ring.push_back(std::move(line));
  while (ring.size() > kMetricRingPoints) ring.pop_front();
}

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    if (eol > pos) lines.push_back(text.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return lines;
}

std::string joinLines(const std::deque<std::string>& lines) {
  std::string out;
  for (const auto& line : lines) out += line + "\n";
  return out;
}

}  // namespace ddp
