#include "launcher/log_layout.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "rendezvous/error.hpp"

namespace ddp {
namespace fs = std::filesystem;

namespace {

std::string makeTempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ddprun_XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw ConfigError("cannot create a temp log dir " + templ + ": " + std::strerror(errno));
  }
  return buf.data();
}

}  // namespace

LogLayout::LogLayout(const std::string& logDir, const std::string& runId, bool keepTemp)
    : keepTemp_(keepTemp) {
  temporaryRoot_ = logDir.empty();
  root_ = temporaryRoot_ ? makeTempRoot() : logDir;
  runDir_ = (fs::path(root_) / runId).string();
  std::error_code ec;
  fs::create_directories(runDir_, ec);
  if (ec) throw ConfigError("cannot create log dir " + runDir_ + ": " + ec.message());
}

LogLayout::~LogLayout() {
  if (!temporaryRoot_ || keepTemp_) return;
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

void LogLayout::prepare(int64_t generation, int nproc) const {
  const fs::path attempt = fs::path(runDir_) / ("attempt_" + std::to_string(generation));
  std::error_code ec;
  fs::remove_all(attempt, ec);
  for (int rank = 0; rank < nproc && !ec; ++rank) {
    fs::create_directories(attempt / std::to_string(rank), ec);
  }
  if (ec) throw ConfigError("cannot create log dir " + attempt.string() + ": " + ec.message());
}

std::string LogLayout::workerDir(int64_t generation, int localRank) const {
  return (fs::path(runDir_) / ("attempt_" + std::to_string(generation)) / std::to_string(localRank))
      .string();
}

std::string LogLayout::stdoutPath(int64_t generation, int localRank) const {
  return workerDir(generation, localRank) + "/stdout.log";
}

std::string LogLayout::stderrPath(int64_t generation, int localRank) const {
  return workerDir(generation, localRank) + "/stderr.log";
}

std::string LogLayout::errorFilePath(int64_t generation, int localRank) const {
  return workerDir(generation, localRank) + "/error.json";
}

}  // namespace ddp
