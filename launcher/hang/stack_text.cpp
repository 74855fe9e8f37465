#include "launcher/hang/stack_text.hpp"

#include <algorithm>
#include <iterator>
#include <sstream>
#include <vector>

namespace ddp {
namespace {

bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

bool isFrame(const std::string& line) {
  return line.size() > 1 && line[0] == '#' && line[1] >= '0' && line[1] <= '9';
}

// Frames that wait for other ranks (native and Python). Not "gloo::transport::tcp::Loop": every
// Gloo process has that thread idling in epoll.
const char* const kPeerWaits[] = {
    "ddp::GlooCommunicator::", "ddp::NcclCommunicator::", "ddp::TcpStoreClient::",
    "ddp::ShmAllreduce::",
    "gloo::allreduce",         "gloo::broadcast",         "gloo::barrier",
    "gloo::allgather",         "gloo::reduce",            "gloo::rendezvous::",
    "UnboundBuffer::wait",     "ncclGroupEnd",            "ncclAllReduce",
    "ncclBroadcast",           "ncclAllGather",           "ncclReduceScatter",
    "c10d::",                  "torch/distributed/",      "torch/nn/parallel/distributed.py",
};

}  // namespace

// True when a line of `text` names a frame that waits for other ranks.
bool mentionsPeerWait(const std::string& text) {
  return std::any_of(std::begin(kPeerWaits), std::end(kPeerWaits),
                     [&](const char* p) { return text.find(p) != std::string::npos; });
}

std::string cleanGdbStacks(const std::string& gdbOutput) {
  // gdb lists the threads from the highest number down; here the main thread (1) goes first, then
  // threads waiting for peers (what a reader looks for), then the rest in thread order.
  std::vector<std::string> threads;
  std::istringstream in(gdbOutput);
  std::string line;
  while (std::getline(in, line)) {
    if (startsWith(line, "Thread ")) {
      threads.push_back(line + "\n");
    } else if (isFrame(line)) {
      if (threads.empty()) threads.emplace_back();
      threads.back() += line + "\n";
    }
  }
  if (threads.empty()) return gdbOutput;
  std::reverse(threads.begin(), threads.end());
  std::stable_partition(threads.begin() + 1, threads.end(), mentionsPeerWait);
  std::string out;
  for (const auto& t : threads) out += (out.empty() ? "" : "\n") + t;
  return out;
}

std::string cleanPythonDump(const std::string& dump) {
  std::istringstream in(dump);
  std::string line, out;
  while (std::getline(in, line)) {
    if (startsWith(line, "Fatal Python error: Aborted") || startsWith(line, "Extension modules:")) {
      continue;
    }
    if (out.empty() && line.empty()) continue;
    out += line + "\n";
  }
  return out;
}

std::string trimStacks(const std::string& stacks, std::size_t maxLines, const std::string& fullPath) {
  std::istringstream in(stacks);
  std::string line, out;
  std::size_t kept = 0, total = 0;
  while (std::getline(in, line)) {
    ++total;
    if (kept < maxLines) {
      out += line + "\n";
      ++kept;
    }
  }
  if (total > kept) {
    out += "... " + std::to_string(total - kept) + " more line(s)" +
           (fullPath.empty() ? std::string() : " in " + fullPath) + "\n";
  }
  return out;
}

bool waitsForPeer(const std::string& stacks) { return mentionsPeerWait(stacks); }

}  // namespace ddp
