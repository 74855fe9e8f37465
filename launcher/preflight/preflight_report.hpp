// Preflight reports and their verdict: what each node of a round reports before its workers start
// (its fingerprint, free disk, clock offset, whether it reached the worker store), the checks the
// round's leader runs over all of them, and the one table it prints. Pure: no I/O, no clock.
//
// Checks (each a flag naming the node(s) and what to do):
//   version  ddprun, torch, CUDA driver, CUDA runtime or NCCL differ between nodes (the kernel and
//            the GPU model are shown, not compared: they differ harmlessly in practice)
//   clock    a node's wall clock is more than clockLimit away from node rank 0's, beyond the
//            measurement's error bound (so a slow store never raises a false alarm)
//   gpus     a node that has GPUs has fewer than its workers, or sees none while another node
//            sees some (a broken driver on one host)
//   port     a node could not connect to the worker store (MASTER_ADDR:MASTER_PORT) in time
//   missing  a node published no report in time (its --preflight may be off)
//
// Thread safety: plain values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ddp {

// Static facts about a node, probed once per agent. "none": absent; "unknown": the probe failed.
struct NodeFingerprint {
  std::string ddprun = "unknown";
  std::string kernel = "unknown";
  std::string cudaDriver = "none";
  std::string cudaRuntime = "none";
  std::string nccl = "none";
  std::string torch = "n/a";  // "n/a" when the entry point is not Python
  int gpus = 0;
  std::string gpuModel = "none";
};

// This node's wall clock minus node rank 0's, within +-errorMs (rendezvous-time measurement; see
// preflight.hpp).
struct ClockOffset {
  int64_t offsetMs = 0;
  int64_t errorMs = 0;
};

// Connecting to the worker store from this node.
struct PortProbe {
  std::string target;  // "addr:port"
  bool ok = false;
  std::string detail;  // "3 ms", "refused", "timed out after 2000 ms", ...
};

struct NodeReport {
  std::string host;
  std::string addr;  // the address other nodes reach it at (hosts may share a name)
  int workers = 1;   // this node's --nproc-per-node
  NodeFingerprint fingerprint;
  std::string diskPath;                  // where checkpoints go (preflight_probe.hpp)
  std::optional<uint64_t> diskFreeBytes;  // nullopt: statvfs failed
  std::optional<ClockOffset> clock;       // nullopt: not measured (node rank 0 is the reference)
  PortProbe port;
};

// One line, JSON. Throws ProtocolError for a value reportFromJson cannot read.
std::string toJson(const NodeReport& report);
NodeReport reportFromJson(const std::string& json);

enum class PreflightCheck { kVersion, kClock, kGpus, kPort, kMissing };
const char* checkName(PreflightCheck check);

struct PreflightFlag {
  PreflightCheck check = PreflightCheck::kVersion;
  std::string line;  // one line: what, on which node(s), and what to do
  // The node ranks the flag blames, when the fault is theirs alone (clock, gpus, port); empty for
  // version (no node is the odd one by itself) and missing (nobody there to act on it).
  std::vector<int> nodes;
};

struct PreflightLimits {
  std::chrono::milliseconds clockLimit{1000};
  std::chrono::milliseconds reportWait{0};  // for the "missing" message
};

// Every flag the reports raise, in check order (version, clock, gpus, port, missing), nodes in
// rank order. `reports[r]` is node rank r's report (nullopt: none arrived).
std::vector<PreflightFlag> evaluatePreflight(const std::vector<std::optional<NodeReport>>& reports,
                                             const PreflightLimits& limits);

// The table the leader prints: a heading, one row per node (rank order), then one "FLAG <check>:
// <line>" per flag. Multi-line, no trailing newline.
std::string formatPreflightTable(int64_t generation,
                                 const std::vector<std::optional<NodeReport>>& reports,
                                 const std::vector<PreflightFlag>& flags);

// The leader's verdict, published to the other nodes: whether the round failed (strict and a
// flag), the number of flags and the first flag's line, and the nodes to blame when every flag
// blames some (bad-node exclusion lets them leave the job instead of failing it).
struct PreflightVerdict {
  bool failed = false;
  int flags = 0;
  std::string firstFlag;
  std::vector<int> blamed;  // ascending; empty when a flag blames no node
};
// The nodes every flag blames together (PreflightVerdict::blamed): empty when any flag blames none.
std::vector<int> blamedNodes(const std::vector<PreflightFlag>& flags);
std::string toJson(const PreflightVerdict& verdict);
// Throws ProtocolError.
PreflightVerdict verdictFromJson(const std::string& json);

}  // namespace ddp
