#include "launcher/agent/verdict.hpp"

#include <signal.h>

#include <algorithm>

namespace ddp {
namespace {

// Signals that come from outside the job: a worker ended by one of them says nothing about the
// job's own code.
constexpr int kOutsideSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGKILL};

bool outsideSignal(int signal) {
  return std::find(std::begin(kOutsideSignals), std::end(kOutsideSignals), signal) !=
         std::end(kOutsideSignals);
}

// What one generation's records say, when it counts.
struct GenerationCause {
  WorkerFailure root;
  int64_t furthestStep = -1;  // the furthest step any of its failures reported; -1 = none
};

std::optional<GenerationCause> causeOf(const std::vector<FailureRecord>& records,
                                       int64_t generation) {
  std::vector<FailureRecord> mine;
  for (const auto& r : records) {
    if (r.generation == generation && !r.recoveredInPlace()) mine.push_back(r);
  }
  if (mine.empty()) return std::nullopt;
  const FailureSummary summary = summarize(mine);
  if (!workerExplains(summary) || !countsForVerdict(summary.rootCause)) return std::nullopt;
  GenerationCause cause{summary.rootCause};
  for (const auto& r : mine) {
    for (const auto& f : r.failures) cause.furthestStep = std::max(cause.furthestStep, f.step);
  }
  return cause;
}

bool sameFailure(const WorkerFailure& a, const WorkerFailure& b) {
  return a.globalRank == b.globalRank && a.exitCode == b.exitCode && a.signal == b.signal &&
         a.message == b.message && a.step == b.step;
}

// The first line of an error text, at most 160 characters.
std::string shortText(const std::string& text) {
  constexpr std::size_t kMax = 160;
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > kMax) line = line.substr(0, kMax - 3) + "...";
  return line;
}

constexpr const char* kStopping = "; stopping instead of restarting";

}  // namespace

std::string budgetSpentNote(const std::string& verdict) {
  const std::string stopping = kStopping;
  std::string judgement = verdict;
  if (judgement.ends_with(stopping)) judgement.resize(judgement.size() - stopping.size());
  return judgement + "; the restart budget is spent as well: the exit code is the root cause's";
}

bool countsForVerdict(const WorkerFailure& f) {
  if (f.stoppedByAgent || isCommunicationFailure(f)) return false;
  if (!f.hang.empty()) return true;  // hung by itself (not waiting for peers): ddprun ended it
  if (f.signal != 0) return !outsideSignal(f.signal);
  return !(f.exitCode > 128 && outsideSignal(f.exitCode - 128));
}

std::string causeText(const WorkerFailure& f) {
  std::string text = "rank " + std::to_string(f.globalRank);
  text += f.signal != 0 ? " " + signalName(f.signal) : " exit " + std::to_string(f.exitCode);
  if (!f.hang.empty()) text += " (hung)";
  if (!f.message.empty()) text += " '" + shortText(f.message) + "'";
  if (f.step >= 0) text += " at step " + std::to_string(f.step);
  return text;
}

std::optional<std::string> judgeGenerations(const std::vector<FailureRecord>& records,
                                            int64_t generation, int after) {
  if (after < 1 || generation + 1 < after) return std::nullopt;
  // causes[0] is `generation`, causes[i] generation - i.
  std::vector<GenerationCause> causes;
  for (int64_t g = generation; g > generation - after; --g) {
    auto cause = causeOf(records, g);
    if (!cause) return std::nullopt;
    causes.push_back(std::move(*cause));
  }
  const WorkerFailure& last = causes.front().root;
  const std::string n = std::to_string(after);
  if (std::all_of(causes.begin(), causes.end(),
                  [&](const GenerationCause& c) { return sameFailure(c.root, last); })) {
    return (after == 1 ? std::string("the same failure in the last generation: ")
                       : "the same failure in " + n + " generations in a row: ") +
           causeText(last) + kStopping;
  }
  // Rule 2: the furthest step of every generation before the run, then each generation of the
  // run, oldest first, reaching no further than everything before it.
  int64_t bar = -1;
  for (const auto& r : records) {
    if (r.generation > generation - after || r.recoveredInPlace()) continue;
    for (const auto& f : r.failures) bar = std::max(bar, f.step);
  }
  if (bar < 0) return std::nullopt;
  for (auto c = causes.rbegin(); c != causes.rend(); ++c) {
    if (c->furthestStep < 0 || c->furthestStep > bar) return std::nullopt;
  }
  return (after == 1 ? std::string("no step progress in the last generation")
                     : "no step progress in " + n + " generations in a row") +
         " (the furthest step stays " + std::to_string(bar) + "; last: " +
         causeText(last) + ")" + kStopping;
}

}  // namespace ddp
