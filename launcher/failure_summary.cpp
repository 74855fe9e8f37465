#include "launcher/failure_summary.hpp"

#include <algorithm>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <sstream>

#include "rendezvous/error.hpp"

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

json workerToJson(const WorkerFailure& f) {
  return json{{"global_rank", f.globalRank},
              {"local_rank", f.localRank},
              {"host", f.host},
              {"pid", f.pid},
              {"exit_code", f.exitCode},
              {"signal", f.signal},
              {"monotonic_ms", f.monotonicMs},
              {"unix_ms", f.unixMs},
              {"error_file", f.errorFile},
              {"message", f.message},
              {"traceback", f.traceback},
              {"stderr_tail", f.stderrTail},
              {"stopped_by_agent", f.stoppedByAgent}};
}

WorkerFailure workerFromJson(const json& j) {
  WorkerFailure f;
  f.globalRank = j.at("global_rank").get<int>();
  f.localRank = j.at("local_rank").get<int>();
  f.host = j.at("host").get<std::string>();
  f.pid = j.at("pid").get<int>();
  f.exitCode = j.at("exit_code").get<int>();
  f.signal = j.at("signal").get<int>();
  f.monotonicMs = j.at("monotonic_ms").get<int64_t>();
  f.unixMs = j.at("unix_ms").get<int64_t>();
  f.errorFile = j.at("error_file").get<std::string>();
  f.message = j.at("message").get<std::string>();
  f.traceback = j.at("traceback").get<std::string>();
  f.stderrTail = j.at("stderr_tail").get<std::vector<std::string>>();
  f.stoppedByAgent = j.at("stopped_by_agent").get<bool>();
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
  label.resize(10, ' ');
  std::istringstream lines(value);
  std::string line;
  bool first = true;
  while (std::getline(lines, line)) {
    out << (first ? "  " + label + ": " : std::string(14, ' ')) << line << "\n";
    first = false;
  }
  if (first) out << "  " << label << ": \n";
}

void appendFailure(std::ostringstream& out, std::size_t index, const WorkerFailure& f) {
  out << "[" << index << "]:\n";
  appendField(out, "time",
              formatTime(f.unixMs) + " (+" + std::to_string(f.monotonicMs) +
                  " ms after the workers started)");
  appendField(out, "host", f.host);
  appendField(out, "rank",
              std::to_string(f.globalRank) + " (local_rank: " + std::to_string(f.localRank) + ")");
  const std::string code = f.signal != 0
                               ? std::to_string(-f.signal) + " (" + signalName(f.signal) + ")"
                               : std::to_string(f.exitCode);
  appendField(out, "exitcode",
              code + " (pid: " + std::to_string(f.pid) + ")" +
                  (f.stoppedByAgent ? " stopped by ddprun after the failure" : ""));
  appendField(out, "error_file", f.message.empty() ? "<N/A>" : f.errorFile);
  std::string trace = f.traceback.empty() ? f.message : f.message + "\n" + f.traceback;
  if (trace.empty()) {
    trace = f.signal != 0 ? "Signal " + std::to_string(f.signal) + " (" + signalName(f.signal) +
                                ") received by PID " + std::to_string(f.pid)
                          : "<no error file written; see the stderr lines below>";
  }
  appendField(out, "traceback", trace);
  if (!f.stderrTail.empty()) {
    std::string tail;
    for (const auto& line : f.stderrTail) tail += line + "\n";
    appendField(out, "stderr", tail);
  }
}

}  // namespace

std::string signalName(int signal) {
  const char* abbrev = ::sigabbrev_np(signal);
  if (abbrev == nullptr) return "signal " + std::to_string(signal);
  return std::string("SIG") + abbrev;
}

bool isCommunicationFailure(const WorkerFailure& failure) {
  // worker_runtime's documented exit code for a failed or timed-out collective (worker_main.hpp).
  constexpr int kCommErrorExitCode = 3;
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

int exitCodeFor(const WorkerFailure& failure) {
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
      out.traceback = stringOf(message["extraInfo"].value("py_callstack", json()));
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
    for (const auto& w : doc.at("failures")) record.failures.push_back(workerFromJson(w));
    return record;
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("malformed failure record: ") + e.what());
  }
}

FailureSummary summarize(const std::vector<FailureRecord>& records) {
  FailureSummary summary;
  if (records.empty()) return summary;
  int64_t last = records.front().generation;
  for (const auto& r : records) last = std::max(last, r.generation);
  std::vector<WorkerFailure> all;
  const FailureRecord* first = nullptr;
  for (const auto& r : records) {
    if (r.generation != last) continue;
    if (first == nullptr) first = &r;
    all.insert(all.end(), r.failures.begin(), r.failures.end());
  }
  // The first reporting node's earliest failure it did not cause itself.
  const auto byTime = [](const WorkerFailure& a, const WorkerFailure& b) {
    if (a.stoppedByAgent != b.stoppedByAgent) return !a.stoppedByAgent;
    return a.monotonicMs < b.monotonicMs;
  };
  auto root = std::min_element(first->failures.begin(), first->failures.end(), byTime);
  if (root == first->failures.end()) return summary;
  summary.rootCause = *root;
  summary.empty = false;
  for (const auto& f : all) {
    if (f.host == root->host && f.pid == root->pid) continue;
    summary.others.push_back(f);
  }
  return summary;
}

std::string formatSummary(const FailureSummary& summary, const std::string& entrypoint) {
  const std::string heavy(kRuleWidth, '='), light(kRuleWidth, '-');
  std::ostringstream out;
  out << heavy << "\n" << entrypoint << " FAILED\n" << light << "\nFailures:\n";
  if (summary.others.empty()) out << "  <NO_OTHER_FAILURES>\n";
  for (std::size_t i = 0; i < summary.others.size(); ++i)
    appendFailure(out, i + 1, summary.others[i]);
  out << light << "\nRoot Cause (first observed failure):\n";
  if (!summary.empty) appendFailure(out, 0, summary.rootCause);
  out << heavy << "\n";
  return out.str();
}

}  // namespace ddp
