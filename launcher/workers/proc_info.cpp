#include "launcher/workers/proc_info.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "launcher/workers/process_tree.hpp"

namespace ddp {
namespace {

// Field k (1-based, as proc(5) numbers them: 3 = state, 4 = ppid, 5 = pgrp, 14 = utime, ...) of the
// stat line, from `fields` (which starts at field 3).
std::optional<uint64_t> field(const std::string& fields, int k) {
  std::istringstream in(fields);
  std::string word;
  for (int i = 3; i <= k; ++i) {
    if (!(in >> word)) return std::nullopt;
  }
  try {
    return std::stoull(word);
  } catch (...) {
    return std::nullopt;
  }
}

void addDescendants(pid_t parent, std::vector<pid_t>& out, int depth) {
  if (depth > 64) return;  // a deeper tree is not a worker's
  std::vector<pid_t> children;
  forEachChild(
      parent, [](pid_t child, void* ctx) { static_cast<std::vector<pid_t>*>(ctx)->push_back(child); },
      &children);
  for (pid_t c : children) {
    out.push_back(c);
    addDescendants(c, out, depth + 1);
  }
}

}  // namespace

std::string statFields(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  std::getline(in, all);
  const auto close = all.rfind(')');
  return close == std::string::npos || close + 2 > all.size() ? "" : all.substr(close + 2);
}

std::optional<uint64_t> treeCpuTicks(pid_t root) {
  const std::string rootStat = statFields(root);
  if (rootStat.empty()) return std::nullopt;
  uint64_t total = 0;
  for (int k : {14, 15, 16, 17}) total += field(rootStat, k).value_or(0);
  std::vector<pid_t> below;
  addDescendants(root, below, 0);
  for (pid_t p : below) {
    const std::string s = statFields(p);
    total += field(s, 14).value_or(0) + field(s, 15).value_or(0);
  }
  return total;
}

uint64_t treeRunDelayNs(pid_t root) {
  std::vector<pid_t> procs{root};
  addDescendants(root, procs, 0);
  uint64_t total = 0;
  std::error_code ec;
  for (pid_t p : procs) {
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(p) + "/task", ec)) {
      std::ifstream in(task.path() / "schedstat");
      uint64_t onCpu = 0, waiting = 0;
      if (in >> onCpu >> waiting) total += waiting;
    }
  }
  return total;
}

bool belongsToWorker(pid_t pid, pid_t worker) {
  if (pid == worker) return true;
  if (::getpgid(pid) == worker) return true;
  pid_t p = pid;
  for (int hops = 0; hops < 64 && p > 1; ++hops) {
    const auto parent = field(statFields(p), 4);
    if (!parent) return false;
    p = static_cast<pid_t>(*parent);
    if (p == worker) return true;
  }
  return false;
}

bool isPythonProcess(pid_t pid) {
  char buf[4096];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n <= 0) return false;
  const std::string exe(buf, static_cast<std::size_t>(n));
  const std::string base = exe.substr(exe.rfind('/') + 1);
  return base.rfind("python", 0) == 0;
}

}  // namespace ddp
