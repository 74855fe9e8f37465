#include "launcher/hang/file_timer_request.hpp"

#include <climits>
#include <cmath>
#include <nlohmann/json.hpp>

namespace ddp {
namespace {

using nlohmann::json;

std::optional<std::string> checkFields(const json& doc) {
  if (!doc.is_object()) return "not a JSON object";
  if (!doc.contains("version") || !doc["version"].is_number_integer() || doc["version"] != 1) {
    return "\"version\" is not 1";
  }
  if (!doc.contains("pid") || !doc["pid"].is_number_integer()) return "\"pid\" is not an integer";
  const int64_t pid = doc["pid"].get<int64_t>();
  if (pid <= 0 || pid > INT_MAX) return "\"pid\" " + std::to_string(pid) + " is not a process id";
  if (!doc.contains("scope_id") || !doc["scope_id"].is_string()) {
    return "\"scope_id\" is not a string";
  }
  if (!doc.contains("expiration_time") || !doc["expiration_time"].is_number()) {
    return "\"expiration_time\" is not a number";
  }
  if (!doc.contains("signal") || !doc["signal"].is_number_integer()) {
    return "\"signal\" is not an integer";
  }
  if (doc.contains("step") && !doc["step"].is_number_integer()) return "\"step\" is not an integer";
  if (doc.contains("compute_s") &&
      (!doc["compute_s"].is_number() || !(doc["compute_s"].get<double>() >= 0) ||
       !std::isfinite(doc["compute_s"].get<double>()))) {
    return "\"compute_s\" is not a number of seconds >= 0";
  }
  return std::nullopt;
}

}  // namespace

std::variant<FileTimerRequest, MalformedTimerLine> parseTimerLine(const std::string& line) {
  if (line.size() >= kMaxTimerLine) {
    return MalformedTimerLine{"longer than " + std::to_string(kMaxTimerLine - 1) + " bytes"};
  }
  const json doc = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return MalformedTimerLine{"not JSON"};
  if (auto why = checkFields(doc)) return MalformedTimerLine{*why};
  FileTimerRequest r;
  r.pid = static_cast<pid_t>(doc["pid"].get<int64_t>());
  r.scopeId = doc["scope_id"].get<std::string>();
  r.expirationTime = doc["expiration_time"].get<double>();
  const int64_t signal = doc["signal"].get<int64_t>();
  r.signal = signal > INT_MAX ? INT_MAX : (signal < INT_MIN ? INT_MIN : static_cast<int>(signal));
  if (doc.contains("step")) r.step = doc["step"].get<int64_t>();
  if (doc.contains("compute_s")) r.computeSeconds = doc["compute_s"].get<double>();
  return r;
}

std::string formatTimerLine(const FileTimerRequest& request) {
  json doc = {{"version", 1},
              {"pid", request.pid},
              {"scope_id", request.scopeId},
              {"expiration_time", request.expirationTime},
              {"signal", request.signal}};
  if (request.step) doc["step"] = *request.step;
  if (request.computeSeconds) doc["compute_s"] = *request.computeSeconds;
  return doc.dump() + "\n";
}

}  // namespace ddp
