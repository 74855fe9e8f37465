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

// The children of `pid`, whose threads are `tids` (see processTree).
std::vector<pid_t> childrenOf(pid_t pid, const std::vector<pid_t>& tids) {
  std::vector<pid_t> children;
  bool listed = false;
  for (pid_t tid : tids) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/children");
    if (!in) continue;
    listed = true;
    for (pid_t child; in >> child;) children.push_back(child);
  }
  if (!listed && !tids.empty()) {
    forEachChild(
        pid, [](pid_t c, void* ctx) { static_cast<std::vector<pid_t>*>(ctx)->push_back(c); },
        &children);
  }
  return children;
}

void addTree(pid_t pid, std::vector<pid_t>& out, int depth) {
  out.push_back(pid);
  if (depth > 64) return;  // a deeper tree is not a worker's
  for (pid_t c : childrenOf(pid, threadsOf(pid))) addTree(c, out, depth + 1);
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
  const std::vector<pid_t> tree = processTree(root);
  for (std::size_t i = 1; i < tree.size(); ++i) {
    const pid_t p = tree[i];
    const std::string s = statFields(p);
    total += field(s, 14).value_or(0) + field(s, 15).value_or(0);
  }
  return total;
}

uint64_t treeRunDelayNs(pid_t root) {
  uint64_t total = 0;
  for (pid_t p : processTree(root)) {
    for (pid_t tid : threadsOf(p)) {
      std::ifstream in("/proc/" + std::to_string(p) + "/task/" + std::to_string(tid) + "/schedstat");
      uint64_t onCpu = 0, waiting = 0;
      if (in >> onCpu >> waiting) total += waiting;
    }
  }
  return total;
}

std::vector<pid_t> processTree(pid_t root) {
  std::vector<pid_t> tree;
  addTree(root, tree, 0);
  return tree;
}

std::vector<pid_t> threadsOf(pid_t pid) {
  std::vector<pid_t> tids;
  std::error_code ec;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    const std::string name = task.path().filename().string();
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos) {
      tids.push_back(static_cast<pid_t>(std::stol(name)));
    }
  }
  return tids;
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
