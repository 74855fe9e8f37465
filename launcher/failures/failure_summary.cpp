#include "launcher/failures/failure_summary.hpp"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

using nlohmann::json;

constexpr int kRecordVersion = 1;
constexpr std::size_t kRuleWidth = 60;

std::string stringOf(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return value.dump();
}

// An integer >= 0 given as a JSON number or a decimal string (torch writes numbers as strings).
std::optional<int64_t> nonNegativeInteger(const json& value) {
  int64_t n = -1;
  if (value.is_number_integer()) {
    n = value.get<int64_t>();
  } else if (value.is_string()) {
    const std::string text = value.get<std::string>();
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
  } else {
    return std::nullopt;
  }
  return n >= 0 ? std::optional<int64_t>(n) : std::nullopt;
}

// The same, positive.
std::optional<int64_t> positiveInteger(const json& value) {
  const auto n = nonNegativeInteger(value);
  return n && *n > 0 ? n : std::nullopt;
}

json workerToJson(const WorkerFailure& f) {
  return json{{"global_rank", f.rank},
              {"local_rank", f.localRank},
              {"host", f.host},
              {"pid", f.pid},
              {"exit_code", f.exitCode},
              {"signal", f.signal},
              {"failure_seq", f.failureSeq},
              {"seq_by_worker", f.seqByWorker},
              {"reap_seq", f.reapSeq},
              {"monotonic_ms", f.monotonicMs},
              {"unix_ms", f.unixMs},
              {"error_file", f.errorFile},
              {"message", f.message},
              {"traceback", f.traceback},
              {"step", f.step},
              {"stderr_tail", f.stderrTail},
              {"stopped_by_agent", f.stoppedByAgent},
              {"hang", f.hang},
              {"stacks", f.stacks},
              {"stacks_file", f.stacksFile},
              {"waits_for_peer", f.waitsForPeer}};
}

WorkerFailure workerFromJson(const json& j) {
  WorkerFailure f;
  f.rank = j.at("global_rank").get<int>();
  f.localRank = j.at("local_rank").get<int>();
  f.host = j.at("host").get<std::string>();
  f.pid = j.at("pid").get<int>();
  f.exitCode = j.at("exit_code").get<int>();
  f.signal = j.at("signal").get<int>();
  f.failureSeq = j.value("failure_seq", int64_t{0});
  f.seqByWorker = j.value("seq_by_worker", false);
  f.reapSeq = j.value("reap_seq", int64_t{0});
  f.monotonicMs = j.at("monotonic_ms").get<int64_t>();
  f.unixMs = j.at("unix_ms").get<int64_t>();
  f.errorFile = j.at("error_file").get<std::string>();
  f.message = j.at("message").get<std::string>();
  f.traceback = j.at("traceback").get<std::string>();
  f.step = j.value("step", int64_t{-1});  // absent in records of older agents
  f.stderrTail = j.at("stderr_tail").get<std::vector<std::string>>();
  f.stoppedByAgent = j.at("stopped_by_agent").get<bool>();
  f.hang = j.value("hang", std::string());  // absent in records of agents without hang detection
  f.stacks = j.value("stacks", std::string());
  f.stacksFile = j.value("stacks_file", std::string());
  f.waitsForPeer = j.value("waits_for_peer", false);
  return f;
}

std::string formatTime(int64_t unixMs) {
  std::time_t seconds = static_cast<std::time_t>(unixMs / 1000);
  std::tm local{};
  localtime_r(&seconds, &local);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d_%H:%M:%S", &local);
  char ms[8];
  std::snprintf(ms, sizeof(ms), ".%03d", static_cast<int>(unixMs % 1000));
  return std::string(buf) + ms;
}

// Continuation lines of a multi-line field line up under its first line.
void appendField(std::ostringstream& out, const std::string& name, const std::string& value) {
  std::string label = name;
  if (label.size() < 10) label.resize(10, ' ');
  std::istringstream lines(value);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    out << (first ? "  " + label + ": " : std::string(14, ' ')) << line << "\n";
    first = false;
  }
  if (first) out << "  " << label << ": \n";
}

// The message and traceback as one block, without repeating the message when the traceback
// already ends with (or contains) it, as Python tracebacks and exceptionChain() do.
std::string traceOf(const WorkerFailure& f) {
  if (f.traceback.empty()) return f.message;
  if (f.message.empty() || f.traceback.find(f.message) != std::string::npos) return f.traceback;
  return f.message + "\n" + f.traceback;
}

std::string orderOf(const WorkerFailure& f) {
  const char* by = f.seqByWorker       ? "the worker when it failed)"
                   : !f.hang.empty()   ? "ddprun when it found the worker hung)"
                                       : "ddprun when it reaped the worker)";
  return "#" + std::to_string(f.failureSeq) + " in the job's failure order (numbered by " + by;
}

void appendFailure(std::ostringstream& out, std::size_t index, const WorkerFailure& f,
                   const WorkerFailure* root) {
  out << "[" << index << "]:\n";
  appendField(out, "time",
              formatTime(f.unixMs) + " (+" + std::to_string(f.monotonicMs) +
                  " ms after the workers started)");
  appendField(out, "host", f.host + " (node rank " + std::to_string(f.groupRank) + ")");
  appendField(out, "rank",
              std::to_string(f.rank) + " (local_rank: " + std::to_string(f.localRank) + ")");
  const std::string code = f.signal != 0
                               ? std::to_string(-f.signal) + " (" + signalName(f.signal) + ")"
                               : std::to_string(f.exitCode);
  appendField(out, "exitcode",
              code + " (pid: " + std::to_string(f.pid) + ")" +
                  (f.stoppedByAgent ? " stopped by ddprun after the failure" : ""));
  if (f.failureSeq > 0) appendField(out, "order", orderOf(f));
  appendField(out, "error_file",
              f.message.empty() || f.errorFile.empty() ? "<N/A>" : f.errorFile);
  std::string trace = traceOf(f);
  if (trace.empty() && !f.hang.empty()) {
    trace = "<none: ddprun took its stacks (below) and ended it>";
  } else if (trace.empty()) {
    trace = f.signal != 0 ? "Signal " + std::to_string(f.signal) + " (" + signalName(f.signal) +
                                ") received by PID " + std::to_string(f.pid)
                          : "<no error file written; see the stderr lines below>";
  }
  appendField(out, "traceback", trace);
  if (!f.hang.empty()) {
    appendField(out, "hang", f.hang);
    appendField(out, "stacks", (f.stacksFile.empty() ? "" : "whole text: " + f.stacksFile + "\n") +
                                   (f.stacks.empty() ? "<none collected>" : f.stacks));
  }
  if (!f.stderrTail.empty()) {
    std::string tail;
    for (const auto& line : f.stderrTail) tail += line + "\n";
    appendField(out, "stderr", tail);
  }
  if (f.collateral && root != nullptr && !f.hang.empty()) {
    appendField(out, "note", "collateral: its stacks show it waiting for its peers while rank " +
                                 std::to_string(root->rank) + " failed on its own");
  } else if (f.collateral && root != nullptr) {
    appendField(out, "note", "collateral: a communication error in the generation in which rank " +
                                 std::to_string(root->rank) + " failed on its own");
  }
}

// The last generation's failures, one record per (generation, node rank), node ranks filled in.
std::vector<WorkerFailure> lastGeneration(const std::vector<FailureRecord>& records,
                                          int64_t& generation) {
  generation = -1;
  for (const auto& r : records) {
    if (!r.recoveredInPlace()) generation = std::max(generation, r.generation);
  }
  std::vector<WorkerFailure> all;
  std::vector<int> seenNodes;
  for (const auto& r : records) {
    if (r.generation != generation || r.recoveredInPlace()) continue;
    if (std::find(seenNodes.begin(), seenNodes.end(), r.nodeRank) != seenNodes.end()) continue;
    seenNodes.push_back(r.nodeRank);
    for (WorkerFailure f : r.failures) {
      f.groupRank = r.nodeRank;
      f.collateral = false;
      all.push_back(std::move(f));
    }
  }
  std::sort(all.begin(), all.end(), failsBefore);
  return all;
}

bool ownFault(const WorkerFailure& f) { return !f.stoppedByAgent && !isCommunicationFailure(f); }

// `comm` is collateral unless every worker that failed on its own provably failed after it.
bool isCollateral(const WorkerFailure& comm, const std::vector<WorkerFailure>& all) {
  if (comm.stoppedByAgent || !isCommunicationFailure(comm)) return false;
  return std::any_of(all.begin(), all.end(), [&](const WorkerFailure& own) {
    if (!ownFault(own)) return false;
    const bool provablyLater =
        own.seqByWorker && comm.failureSeq > 0 && comm.failureSeq < own.failureSeq;
    return !provablyLater;
  });
}

}  // namespace

bool isCommunicationFailure(const WorkerFailure& failure) {
  // worker_runtime's documented exit code for a failed or timed-out collective (worker_main.hpp).
  constexpr int kCommErrorExitCode = 3;
  if (!failure.hang.empty()) return failure.waitsForPeer;
  if (failure.signal == 0 && failure.exitCode == kCommErrorExitCode) return true;
  static const char* const kPatterns[] = {
      "Connection closed by peer", "Connection reset by peer", "Broken pipe",
      "ddp::CommError",            "CommError",                "DistNetworkError",
      "DistBackendError",          "NCCL error",               "ncclRemoteError",
      "ncclSystemError",           "ProcessGroupNCCL",         "gloo/transport",
  };
  const auto mentions = [](const std::string& text) {
    return std::any_of(std::begin(kPatterns), std::end(kPatterns),
                       [&](const char* p) { return text.find(p) != std::string::npos; });
  };
  if (mentions(failure.message) || mentions(failure.traceback)) return true;
  return std::any_of(failure.stderrTail.begin(), failure.stderrTail.end(), mentions);
}

int ddprunExitCode(const WorkerFailure& failure) {
  return failure.signal != 0 ? 128 + failure.signal : failure.exitCode;
}

std::optional<ErrorFileContents> readErrorFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("message")) return std::nullopt;
  ErrorFileContents out;
  const json& message = doc["message"];
  if (message.is_object()) {  // {"message": {"message": ..., "extraInfo": {...}, "errorCode": n}}
    out.message = stringOf(message.value("message", json()));
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      const json& extra = message["extraInfo"];
      out.traceback = stringOf(extra.value("py_callstack", json()));
      out.failureSeq = positiveInteger(extra.value("failure_seq", json()));
      out.step = nonNegativeInteger(extra.value("step", json()));
    }
    if (message.contains("errorCode") && message["errorCode"].is_number_integer()) {
      out.errorCode = message["errorCode"].get<int>();
    }
  } else {  // {"message": "<str>", "timestamp": n}
    out.message = stringOf(message);
  }
  return out;
}

std::string toJson(const FailureRecord& record) {
  json workers = json::array();
  for (const auto& f : record.failures) workers.push_back(workerToJson(f));
  return json{{"version", kRecordVersion},
              {"generation", record.generation},
              {"node_rank", record.nodeRank},
              {"host", record.host},
              {"quorum", record.quorum},
              {"failures", workers}}
      .dump();
}

FailureRecord failureRecordFromJson(const std::string& text) {
  try {
    const json doc = json::parse(text);
    if (doc.at("version").get<int>() != kRecordVersion) {
      throw ProtocolError("failure record has version " + doc.at("version").dump() + ", expected " +
                          std::to_string(kRecordVersion));
    }
    FailureRecord record;
    record.generation = doc.at("generation").get<int64_t>();
    record.nodeRank = doc.at("node_rank").get<int>();
    record.host = doc.at("host").get<std::string>();
    record.quorum = doc.value("quorum", int64_t(-1));  // absent in records of older agents
    for (const auto& w : doc.at("failures")) record.failures.push_back(workerFromJson(w));
    return record;
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("malformed failure record: ") + e.what());
  }
}

bool failsBefore(const WorkerFailure& a, const WorkerFailure& b) {
  const auto key = [](const WorkerFailure& f) {
    const bool numbered = f.failureSeq > 0;
    return std::make_tuple(!numbered, numbered ? f.failureSeq : 0, numbered ? 0 : f.groupRank,
                           numbered ? 0 : f.reapSeq, f.rank);
  };
  return key(a) < key(b);
}

FailureSummary summarize(const std::vector<FailureRecord>& records) {
  FailureSummary summary;
  for (const auto& r : records) {
    if (!r.recoveredInPlace()) continue;
    for (WorkerFailure f : r.failures) {
      f.groupRank = r.nodeRank;
      summary.recovered.push_back({std::move(f), r.generation, r.quorum});
    }
  }
  if (records.empty()) return summary;
  std::vector<WorkerFailure> all = lastGeneration(records, summary.generation);
  if (all.empty()) return summary;
  for (auto& f : all) f.collateral = isCollateral(f, all);
  auto root = std::find_if(all.begin(), all.end(), [](const WorkerFailure& f) {
    return !f.stoppedByAgent && !f.collateral;
  });
  if (root == all.end()) root = all.begin();
  summary.rootCause = *root;
  summary.empty = false;
  all.erase(root);
  summary.others = std::move(all);
  return summary;
}

bool workerExplains(const FailureSummary& summary) {
  return !summary.empty && !summary.rootCause.stoppedByAgent;
}

namespace {

// formatSummary's table; with a verdict, its root cause is headed by the verdict's line and
// followed by the verdict's exit code; with a note, the root cause is followed by it.
std::string formatTable(const FailureSummary& summary, const std::string& entrypoint,
                        const RendezvousCause* verdict, const std::string& verdictNote = {}) {
  const std::string heavy(kRuleWidth, '='), light(kRuleWidth, '-');
  std::ostringstream out;
  out << heavy << "\n" << entrypoint << " FAILED\n" << light << "\nFailures:\n";
  if (summary.others.empty()) out << "  <NO_OTHER_FAILURES>\n";
  const WorkerFailure* root = summary.empty ? nullptr : &summary.rootCause;
  for (std::size_t i = 0; i < summary.others.size(); ++i)
    appendFailure(out, i + 1, summary.others[i], root);
  out << light << "\nRoot Cause (" << (verdict ? verdict->reason : "first observed failure")
      << "):\n";
  if (root != nullptr) appendFailure(out, 0, *root, nullptr);
  if (verdict != nullptr) {
    appendField(out, "verdict",
                "exitcode " + std::to_string(verdict->exitCode) + " (" + verdict->kind + ")");
  }
  if (!verdictNote.empty()) appendField(out, "verdict", verdictNote);
  if (!summary.recovered.empty()) {
    out << light << "\nRecovered in place (" << summary.recovered.size()
        << "; the other workers kept running):\n";
    for (const auto& r : summary.recovered) {
      const WorkerFailure& f = r.failure;
      const std::string how = !f.hang.empty() ? "hung" : f.signal != 0 ? signalName(f.signal)
                                                        : "exitcode " + std::to_string(f.exitCode);
      out << "  rank " << f.rank << " on " << f.host << " (node rank " << f.groupRank
          << ", pid " << f.pid << "): " << how << "; replaced, quorum " << r.generation << "."
          << r.quorum << "\n";
    }
  }
  out << heavy << "\n";
  return out.str();
}

}  // namespace

std::string formatSummary(const FailureSummary& summary, const std::string& entrypoint,
                          const RendezvousCause& cause) {
  const std::string heavy(kRuleWidth, '='), light(kRuleWidth, '-');
  std::vector<WorkerFailure> failures;
  if (!summary.empty) failures.push_back(summary.rootCause);
  failures.insert(failures.end(), summary.others.begin(), summary.others.end());
  std::sort(failures.begin(), failures.end(), failsBefore);
  std::ostringstream out;
  out << heavy << "\n" << entrypoint << " FAILED\n" << light << "\nFailures:\n";
  if (failures.empty()) out << "  <NO_OTHER_FAILURES>\n";
  for (std::size_t i = 0; i < failures.size(); ++i) appendFailure(out, i + 1, failures[i], nullptr);
  out << light << "\nRoot Cause (first observed failure):\n[0]:\n";
  appendField(out, "rendezvous", cause.reason);
  appendField(out, "exitcode", std::to_string(cause.exitCode) + " (" + cause.kind + ")");
  out << heavy << "\n";
  return out.str();
}

std::string formatSummary(const FailureSummary& summary, const std::string& entrypoint) {
  return formatTable(summary, entrypoint, nullptr);
}

std::string formatBudgetSpentSummary(const FailureSummary& summary, const std::string& entrypoint,
                                    const std::string& verdictNote) {
  return formatTable(summary, entrypoint, nullptr, verdictNote);
}

std::string formatVerdictSummary(const FailureSummary& summary, const std::string& entrypoint,
                                 const RendezvousCause& verdict) {
  if (!workerExplains(summary)) return formatSummary(summary, entrypoint, verdict);
  return formatTable(summary, entrypoint, &verdict);
}

}  // namespace ddp
