#include "launcher/failures/verdict.hpp"

#include <signal.h>

#include <algorithm>
#include <utility>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

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

// One try of the job's code: a replacement in place (a recovery record) or a generation's end
// (its failure records). `root` is empty when it does not count (see verdict.hpp).
struct Attempt {
  std::optional<WorkerFailure> root;
  bool inPlace = false;
};

std::optional<WorkerFailure> countingRoot(const std::vector<FailureRecord>& records) {
  const FailureSummary summary = summarize(records);
  if (!workerExplains(summary) || !countsForVerdict(summary.rootCause)) return std::nullopt;
  return summary.rootCause;
}

// Every attempt up to `generation`, in order: each generation's recoveries by quorum number, then
// its end. A generation without failure records (a lost node, a scale-up) is an attempt that does
// not count.
std::vector<Attempt> attemptsUpTo(const std::vector<FailureRecord>& records, int64_t generation) {
  int64_t first = generation;
  for (const auto& r : records) first = std::min(first, r.generation);
  std::vector<Attempt> attempts;
  for (int64_t g = std::max<int64_t>(first, 0); g <= generation; ++g) {
    std::vector<const FailureRecord*> recoveries;
    std::vector<FailureRecord> ending;
    for (const auto& r : records) {
      if (r.generation != g) continue;
      if (r.recoveredInPlace()) {
        recoveries.push_back(&r);
      } else {
        ending.push_back(r);
      }
    }
    std::stable_sort(recoveries.begin(), recoveries.end(),
                     [](const FailureRecord* a, const FailureRecord* b) { return a->quorum < b->quorum; });
    for (const FailureRecord* r : recoveries) {
      FailureRecord asEnd = *r;  // summarize() sets recoveries aside: judge it as an end
      asEnd.quorum = -1;
      attempts.push_back({countingRoot({asEnd}), true});
    }
    attempts.push_back({ending.empty() ? std::nullopt : countingRoot(ending), false});
  }
  return attempts;
}

bool sameFailure(const WorkerFailure& a, const WorkerFailure& b) {
  return a.rank == b.rank && a.exitCode == b.exitCode && a.signal == b.signal &&
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
  std::string text = "rank " + std::to_string(f.rank);
  text += f.signal != 0 ? " " + signalName(f.signal) : " exit " + std::to_string(f.exitCode);
  if (!f.hang.empty()) text += " (hung)";
  if (!f.message.empty()) text += " '" + shortText(f.message) + "'";
  if (f.step >= 0) text += " at step " + std::to_string(f.step);
  return text;
}

std::optional<std::string> judgeGenerations(const std::vector<FailureRecord>& records,
                                            int64_t generation, int after) {
  if (after < 1) return std::nullopt;
  const std::string n = std::to_string(after);
  // Rule 1 over attempts: restarts and replacements in place alike.
  const std::vector<Attempt> attempts = attemptsUpTo(records, generation);
  if (attempts.size() >= static_cast<std::size_t>(after) && attempts.back().root) {
    const WorkerFailure& last = *attempts.back().root;
    const auto run = attempts.end() - after;
    const bool same = std::all_of(run, attempts.end(), [&](const Attempt& a) {
      return a.root && sameFailure(*a.root, last);
    });
    const auto inPlace = std::count_if(run, attempts.end(), [](const Attempt& a) {
      return a.inPlace;
    });
    if (same && inPlace > 0) {
      return "the same failure " + n + " times in a row (" + std::to_string(inPlace) + " of them "
             "replaced in place): " + causeText(last) + kStopping;
    }
    if (same) {
      return (after == 1 ? std::string("the same failure in the last generation: ")
                         : "the same failure in " + n + " generations in a row: ") +
             causeText(last) + kStopping;
    }
  }
  if (generation + 1 < after) return std::nullopt;
  // causes[0] is `generation`, causes[i] generation - i.
  std::vector<GenerationCause> causes;
  for (int64_t g = generation; g > generation - after; --g) {
    auto cause = causeOf(records, g);
    if (!cause) return std::nullopt;
    causes.push_back(std::move(*cause));
  }
  const WorkerFailure& last = causes.front().root;
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

std::string judgeWithLedger(FailureLedger& ledger, FailureRecord record, int after) {
  if (after < 1) return "";
  std::vector<FailureRecord> records;
  try {
    for (const auto& json : ledger.failureRecords()) records.push_back(failureRecordFromJson(json));
  } catch (const Error& e) {
    logger("agent")->warn("no verdict: the job's failure records could not be read ({})",
                          e.what());
    return "";
  }
  const int64_t generation = record.generation;
  records.push_back(std::move(record));
  return judgeGenerations(records, generation, after).value_or("");
}

}  // namespace ddp
