#include "launcher/workers/log_layout.hpp"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

#include "rendezvous/base/error.hpp"
#include "rendezvous/base/logging.hpp"

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

// create_directories that tolerates other agents creating the same folders at the same time:
// a component that appears between the check and the mkdir is fine as long as it is a folder.
void makeDirs(const fs::path& dir) {
  std::error_code ec;
  for (int attempt = 0; attempt < 3; ++attempt) {
    fs::create_directories(dir, ec);
    if (!ec || fs::is_directory(dir)) return;
  }
  throw ConfigError("cannot create log dir " + dir.string() + ": " + ec.message());
}

}  // namespace

LogLayout::LogLayout(const std::string& logDir, const std::string& runId, bool keepTemp)
    : keepTemp_(keepTemp) {
  temporaryRoot_ = logDir.empty();
  root_ = temporaryRoot_ ? makeTempRoot() : logDir;
  runDir_ = (fs::path(root_) / runId).string();
  try {
    makeDirs(runDir_);
  } catch (...) {
    cleanUp();
    throw;
  }
}

LogLayout::~LogLayout() { cleanUp(); }

void LogLayout::cleanUp() {
  if (!temporaryRoot_ || cleanedUp_) return;
  cleanedUp_ = true;
  if (keepTemp_) {
    logger("agent")->info("worker logs and error files kept in {}", runDir_);
    return;
  }
  std::error_code ignored;
  fs::remove_all(root_, ignored);
}

void LogLayout::beginGeneration(int64_t generation, int nodeRank) {
  nodeRanks_[generation] = nodeRank;
}

int LogLayout::nodeRankOf(int64_t generation) const {
  auto it = nodeRanks_.find(generation);
  return it == nodeRanks_.end() ? 0 : it->second;
}

void LogLayout::prepare(int64_t generation, int nproc) const {
  const fs::path attempt = fs::path(workerDir(generation, 0)).parent_path();
  std::error_code ec;
  fs::remove_all(attempt, ec);  // a stale attempt of this node (a reused run id), nobody else's
  if (ec) throw ConfigError("cannot clear log dir " + attempt.string() + ": " + ec.message());
  for (int rank = 0; rank < nproc; ++rank) makeDirs(attempt / std::to_string(rank));
}

std::string LogLayout::workerDir(int64_t generation, int localRank) const {
  return (fs::path(runDir_) / ("node_" + std::to_string(nodeRankOf(generation))) /
          ("attempt_" + std::to_string(generation)) / std::to_string(localRank))
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

bool LogLayout::contains(const std::string& path) const {
  const std::string prefix = fs::path(root_).lexically_normal().string() + "/";
  return fs::path(path).lexically_normal().string().starts_with(prefix);
}

}  // namespace ddp
