#include "launcher/preflight/preflight_report.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "rendezvous/base/duration_text.hpp"
#include "rendezvous/base/error.hpp"

namespace ddp {
namespace {

using nlohmann::json;

// The fingerprint fields compared across nodes, with their names in flags and in the table.
struct VersionField {
  const char* name;
  std::string NodeFingerprint::*field;
};
constexpr VersionField kCompared[] = {
    {"ddprun", &NodeFingerprint::ddprun},
    {"torch", &NodeFingerprint::torch},
    {"CUDA driver", &NodeFingerprint::cudaDriver},
    {"CUDA runtime", &NodeFingerprint::cudaRuntime},
    {"NCCL", &NodeFingerprint::nccl},
};

std::string nodeName(int rank, const NodeReport& r) {
  return "node " + std::to_string(rank) + " (" + r.host + (r.addr.empty() ? "" : ", " + r.addr) + ")";
}

std::string rankList(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "node " : "nodes ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? "," : "") + std::to_string(ranks[i]);
  return out;
}

void versionFlags(const std::vector<std::optional<NodeReport>>& reports,
                  std::vector<PreflightFlag>& flags) {
  for (const auto& f : kCompared) {
    // value -> ranks, in order of first appearance (node rank 0's value first)
    std::vector<std::pair<std::string, std::vector<int>>> seen;
    for (size_t r = 0; r < reports.size(); ++r) {
      if (!reports[r]) continue;
      const std::string& value = reports[r]->fingerprint.*f.field;
      auto it = std::find_if(seen.begin(), seen.end(), [&](auto& s) { return s.first == value; });
      if (it == seen.end()) it = seen.insert(seen.end(), {value, {}});
      it->second.push_back(static_cast<int>(r));
    }
    if (seen.size() < 2) continue;
    std::string line = std::string(f.name) + " differs between nodes:";
    for (size_t i = 0; i < seen.size(); ++i) {
      line += std::string(i ? ";" : "") + " " + seen[i].first + " on " + rankList(seen[i].second);
    }
    flags.push_back({PreflightCheck::kVersion, line + " (install the same versions everywhere)", {}});
  }
}

void clockFlags(const std::vector<std::optional<NodeReport>>& reports,
                const PreflightLimits& limits, std::vector<PreflightFlag>& flags) {
  for (size_t r = 1; r < reports.size(); ++r) {
    if (!reports[r] || !reports[r]->clock) continue;
    const ClockOffset& c = *reports[r]->clock;
    // Only a skew beyond the error bound is certain.
    if (std::abs(c.offsetMs) - c.errorMs <= limits.clockLimit.count()) continue;
    flags.push_back({PreflightCheck::kClock,
                     nodeName(static_cast<int>(r), *reports[r]) + "'s clock is " +
                         secondsText(std::chrono::milliseconds(std::abs(c.offsetMs))) + (c.offsetMs > 0 ? " ahead of" : " behind") +
                         " node 0's (+-" + std::to_string(c.errorMs) + " ms; limit " +
                         std::to_string(limits.clockLimit.count()) +
                         " ms): synchronise the clocks with NTP (timedatectl set-ntp true)",
                     {static_cast<int>(r)}});
  }
}

void gpuFlags(const std::vector<std::optional<NodeReport>>& reports,
              std::vector<PreflightFlag>& flags) {
  int most = 0;
  int mostRank = -1;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (reports[r] && reports[r]->fingerprint.gpus > most) {
      most = reports[r]->fingerprint.gpus;
      mostRank = static_cast<int>(r);
    }
  }
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!reports[r]) continue;
    const NodeReport& n = *reports[r];
    const int gpus = n.fingerprint.gpus;
    const std::string who = nodeName(static_cast<int>(r), n);
    if (gpus > 0 && gpus < n.workers) {
      flags.push_back({PreflightCheck::kGpus,
                       who + " has " + std::to_string(gpus) + " GPU(s) for " +
                           std::to_string(n.workers) + " workers (--nproc-per-node)",
                       {static_cast<int>(r)}});
    } else if (gpus == 0 && most > 0) {
      flags.push_back({PreflightCheck::kGpus,
                       who + " sees no GPU while node " + std::to_string(mostRank) + " sees " +
                           std::to_string(most) + " (driver, CUDA_VISIBLE_DEVICES?)",
                       {static_cast<int>(r)}});
    }
  }
}

void portAndMissingFlags(const std::vector<std::optional<NodeReport>>& reports,
                         const PreflightLimits& limits, std::vector<PreflightFlag>& flags) {
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!reports[r] || reports[r]->port.ok) continue;
    const NodeReport& n = *reports[r];
    flags.push_back({PreflightCheck::kPort,
                     nodeName(static_cast<int>(r), n) + " cannot connect to the worker store " +
                         n.port.target + " (" + n.port.detail +
                         "): open the port range between the nodes (firewall) or set "
                         "--local-addr to an address they reach",
                     {static_cast<int>(r)}});
  }
  std::vector<int> missing;
  for (size_t r = 0; r < reports.size(); ++r) {
    if (!reports[r]) missing.push_back(static_cast<int>(r));
  }
  if (!missing.empty()) {
    flags.push_back({PreflightCheck::kMissing,
                     rankList(missing) + " sent no preflight report within " +
                         std::to_string(limits.reportWait.count()) +
                         " ms (is --preflight off there? every node needs the same setting)",
                     {}});
  }
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}

std::vector<std::string> row(size_t rank, const std::optional<NodeReport>& report) {
  if (!report) return {std::to_string(rank), "(no report)"};
  const NodeReport& n = *report;
  const NodeFingerprint& f = n.fingerprint;
  const std::string gpus = f.gpus == 0 ? "none" : std::to_string(f.gpus) + " x " + f.gpuModel;
  const std::string disk = (n.diskFreeBytes ? gib(*n.diskFreeBytes) : "?") + " " + n.diskPath;
  std::string clock = "reference";
  if (rank > 0) {
    clock = n.clock ? (n.clock->offsetMs >= 0 ? "+" : "") + std::to_string(n.clock->offsetMs) +
                          " ms +-" + std::to_string(n.clock->errorMs)
                    : "?";
  }
  const std::string port = (n.port.ok ? "ok " : "CLOSED ") + n.port.target + " (" + n.port.detail + ")";
  return {std::to_string(rank), n.host + (n.addr.empty() ? "" : " " + n.addr), f.ddprun, f.torch, f.cudaDriver, f.cudaRuntime, f.nccl,
          gpus, f.kernel, disk, clock, port};
}

std::string formatRows(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r[i].size());
    }
  }
  std::string out;
  for (const auto& r : rows) {
    std::string line = "  ";
    for (size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 2, ' ');
    }
    out += "\n" + line;
  }
  return out;
}

template <class T>
T field(const json& j, const char* key) {
  try {
    return j.at(key).get<T>();
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("preflight record: field '") + key + "': " + e.what());
  }
}

json parse(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw ProtocolError(std::string("preflight record is not JSON: ") + e.what());
  }
}

}  // namespace

const char* checkName(PreflightCheck check) {
  switch (check) {
    case PreflightCheck::kVersion: return "version";
    case PreflightCheck::kClock: return "clock";
    case PreflightCheck::kGpus: return "gpus";
    case PreflightCheck::kPort: return "port";
    case PreflightCheck::kMissing: return "missing";
  }
  return "unknown";
}

std::string toJson(const NodeReport& r) {
  const NodeFingerprint& f = r.fingerprint;
  json j = {{"host", r.host}, {"addr", r.addr}, {"workers", r.workers}, {"ddprun", f.ddprun}, {"kernel", f.kernel},
            {"cuda_driver", f.cudaDriver}, {"cuda_runtime", f.cudaRuntime}, {"nccl", f.nccl},
            {"torch", f.torch}, {"gpus", f.gpus}, {"gpu_model", f.gpuModel},
            {"disk_path", r.diskPath}, {"port_target", r.port.target}, {"port_ok", r.port.ok},
            {"port_detail", r.port.detail}};
  j["disk_free"] = r.diskFreeBytes ? json(*r.diskFreeBytes) : json(nullptr);
  j["clock"] = r.clock ? json::array({r.clock->offsetMs, r.clock->errorMs}) : json(nullptr);
  return j.dump();
}

NodeReport reportFromJson(const std::string& text) {
  const json j = parse(text);
  NodeReport r;
  r.host = field<std::string>(j, "host");
  r.addr = field<std::string>(j, "addr");
  r.workers = field<int>(j, "workers");
  NodeFingerprint& f = r.fingerprint;
  f.ddprun = field<std::string>(j, "ddprun");
  f.kernel = field<std::string>(j, "kernel");
  f.cudaDriver = field<std::string>(j, "cuda_driver");
  f.cudaRuntime = field<std::string>(j, "cuda_runtime");
  f.nccl = field<std::string>(j, "nccl");
  f.torch = field<std::string>(j, "torch");
  f.gpus = field<int>(j, "gpus");
  f.gpuModel = field<std::string>(j, "gpu_model");
  r.diskPath = field<std::string>(j, "disk_path");
  if (const auto free = field<json>(j, "disk_free"); !free.is_null()) {
    r.diskFreeBytes = field<uint64_t>(j, "disk_free");
  }
  if (const auto clock = field<json>(j, "clock"); !clock.is_null()) {
    const auto pair = field<std::vector<int64_t>>(j, "clock");
    if (pair.size() != 2) throw ProtocolError("preflight record: field 'clock' is not a pair");
    r.clock = ClockOffset{pair[0], pair[1]};
  }
  r.port = PortProbe{field<std::string>(j, "port_target"), field<bool>(j, "port_ok"),
                     field<std::string>(j, "port_detail")};
  return r;
}

std::vector<PreflightFlag> evaluatePreflight(const std::vector<std::optional<NodeReport>>& reports,
                                             const PreflightLimits& limits) {
  std::vector<PreflightFlag> flags;
  versionFlags(reports, flags);
  clockFlags(reports, limits, flags);
  gpuFlags(reports, flags);
  portAndMissingFlags(reports, limits, flags);
  return flags;
}

std::string formatPreflightTable(int64_t generation,
                                 const std::vector<std::optional<NodeReport>>& reports,
                                 const std::vector<PreflightFlag>& flags) {
  std::vector<std::vector<std::string>> rows = {
      {"node", "host", "ddprun", "torch", "CUDA driver", "CUDA runtime", "NCCL", "GPUs", "kernel",
       "disk free (checkpoints)", "clock vs node 0", "worker store"}};
  for (size_t r = 0; r < reports.size(); ++r) rows.push_back(row(r, reports[r]));
  std::string out = "preflight of generation " + std::to_string(generation) + ": " +
                    std::to_string(reports.size()) + " node(s), " +
                    (flags.empty() ? std::string("no flags") : std::to_string(flags.size()) + " flag(s)");
  out += formatRows(rows);
  for (const auto& f : flags) out += std::string("\n  FLAG ") + checkName(f.check) + ": " + f.line;
  return out;
}

std::vector<int> blamedNodes(const std::vector<PreflightFlag>& flags) {
  std::set<int> nodes;
  for (const auto& f : flags) {
    if (f.nodes.empty()) return {};
    nodes.insert(f.nodes.begin(), f.nodes.end());
  }
  return {nodes.begin(), nodes.end()};
}

std::string toJson(const PreflightVerdict& v) {
  return json{{"failed", v.failed}, {"flags", v.flags}, {"first", v.firstFlag},
              {"blamed", v.blamed}}.dump();
}

PreflightVerdict verdictFromJson(const std::string& text) {
  const json j = parse(text);
  PreflightVerdict v{field<bool>(j, "failed"), field<int>(j, "flags"),
                     field<std::string>(j, "first"), {}};
  // An older leader sends none: nobody is blamed.
  if (j.contains("blamed")) v.blamed = field<std::vector<int>>(j, "blamed");
  return v;
}

}  // namespace ddp
