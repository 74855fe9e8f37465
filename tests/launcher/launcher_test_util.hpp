// Helpers shared by the launcher tests: paths from the CTest environment, files, deadlines.
#pragma once

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace ddp::test {

inline std::string envOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

inline std::string binDir() { return envOr("DDP_BIN_DIR", "build/bin"); }
inline std::string workerBin() { return binDir() + "/ddp_test_worker"; }

// A fresh, empty scratch dir per call.
inline std::string scratchDir(const std::string& name) {
  static int counter = 0;
  const std::string dir = envOr("DDP_TEST_TMP", "/tmp") + "/" + name + "_" +
                          std::to_string(::getpid()) + "_" + std::to_string(counter++);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream s(text);
  std::string line;
  while (std::getline(s, line)) out.push_back(line);
  return out;
}

// Polls (5 ms steps) until every path exists or `budget` passes; true when all exist.
inline bool waitForFiles(const std::vector<std::string>& paths,
                         std::chrono::milliseconds budget = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    bool all = true;
    for (const auto& p : paths) all = all && std::filesystem::exists(p);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

// True once `pid` no longer exists (or is a zombie of someone else), within `budget`.
inline bool waitForPidGone(pid_t pid, std::chrono::milliseconds budget = std::chrono::seconds(30)) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::kill(pid, 0) != 0) return true;
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string all;
    std::getline(stat, all);
    const auto close = all.rfind(')');
    if (close != std::string::npos && close + 2 < all.size() && all[close + 2] == 'Z') return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

}  // namespace ddp::test
