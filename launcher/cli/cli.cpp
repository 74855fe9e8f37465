#include "launcher/cli/cli.hpp"

#include <climits>
#include <iostream>

#include "ddp_version.hpp"
#include "launcher/cli/cli_describe.hpp"
#include "launcher/cli/cli_detect.hpp"
#include "launcher/cli/cli_entrypoint.hpp"
#include "launcher/cli/cli_options.hpp"
#include "launcher/cli/cli_rendezvous.hpp"
#include "launcher/cli/cli_values.hpp"
#include "launcher/cli/python_package.hpp"
#include "launcher/cli/rdzv_conf.hpp"
#include "launcher/config/log_prefix.hpp"
#include "launcher/numa/nproc.hpp"
#include "launcher/numa/numa_setup.hpp"
#include "launcher/numa/virtual_devices.hpp"
#include "rendezvous/base/build_info.hpp"

namespace ddp {
namespace {

using detail::optionSpec;

constexpr const char* kDefaultSignals = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";

struct Sourced {
  std::string value;
  std::string origin;  // "--nnodes" or "PET_NNODES"
};

// Looks each option up on the command line, then in its environment variables, and converts it,
// naming the origin in errors. Records which options the user set.
class Resolver {
 public:
  Resolver(const detail::RawArgs& raw, const EnvLookup& getenv, LaunchConfig& config)
      : raw_(raw), getenv_(getenv), config_(config) {}

  std::optional<Sourced> find(const std::string& dest) {
    const auto& spec = optionSpec(dest);
    std::optional<Sourced> found;
    // "--rdzv-id=" (an unset shell variable, in practice) counts as not given, as in torchrun's
    // reading of an empty endpoint (the backend's default) and of an empty id.
    const bool emptyIsAbsent = dest == "rdzv_endpoint" || dest == "rdzv_id";
    if (auto it = raw_.values.find(dest);
        it != raw_.values.end() && !(emptyIsAbsent && it->second.empty())) {
      found = Sourced{it->second, longName(dest)};
    } else {
      for (const auto& var : spec.env) {
        auto value = getenv_(var);
        // An empty value means "set" for a switch (Kubeflow's PET_STANDALONE="") and "unset"
        // for an option that needs a value.
        if (value && (spec.isFlag || !value->empty())) {
          found = Sourced{*value, var};
          if (!config_.explicitOptions.contains(dest))
            config_.notes.push_back("from the environment: " + var + "=" + *value);
          break;
        }
      }
    }
    if (found) config_.explicitOptions.insert(dest);
    return found;
  }

  template <class T, class Parse>
  std::optional<T> get(const std::string& dest, Parse parse) {
    auto found = find(dest);
    if (!found) return std::nullopt;
    try {
      return parse(found->value);
    } catch (const ConfigError& e) {
      throw UsageError(found->origin + " '" + found->value + "': " + e.what());
    }
  }

  // Every value of a repeatable option, in order: each occurrence on the command line, else the
  // one of its variable (the command line wins, as for every option). Empty: not given.
  std::vector<Sourced> every(const std::string& dest) {
    auto found = find(dest);
    if (!found) return {};
    auto it = raw_.every.find(dest);
    if (it == raw_.every.end() || found->origin != longName(dest)) return {*found};
    std::vector<Sourced> all;
    for (const auto& value : it->second) all.push_back(Sourced{value, found->origin});
    return all;
  }

  std::optional<std::string> text(const std::string& dest) {
    auto found = find(dest);
    return found ? std::optional<std::string>(found->value) : std::nullopt;
  }

  bool flag(const std::string& dest) {
    return get<bool>(dest, detail::parseEnvBool).value_or(false);
  }

  static std::string longName(const std::string& dest) {
    for (const auto& name : optionSpec(dest).names)
      if (name.starts_with("--")) return name;
    return dest;
  }

 private:
  const detail::RawArgs& raw_;
  const EnvLookup& getenv_;
  LaunchConfig& config_;
};

int intIn(const std::string& s, int lo, int hi) { return detail::parseInt(s, lo, hi); }

std::chrono::milliseconds positiveDuration(const std::string& s) {
  const auto d = detail::parseDuration(s);
  if (d.count() <= 0) throw ConfigError("must be a positive duration");
  return d;
}

std::string oneOf(const std::string& s, std::initializer_list<const char*> choices) {
  std::string list;
  for (const char* c : choices) {
    if (s == c) return s;
    list += (list.empty() ? "" : ", ") + std::string(c);
  }
  throw ConfigError("must be one of " + list);
}

void resolveWorkers(Resolver& r, LaunchConfig& c, const EnvLookup& getenv) {
  if (auto n = r.get<detail::NodeRange>("nnodes", detail::parseNnodes)) {
    c.minNodes = n->minNodes;
    c.maxNodes = n->maxNodes;
  }
  if (auto spec = r.text("nproc_per_node")) c.nprocSpec = *spec;
  c.nprocPerNode = r.get<int>("nproc_per_node", [&](const std::string& s) {
                      return resolveNprocPerNode(s, getenv);
                    }).value_or(1);
  c.nodeRank = r.get<int>("node_rank", [](auto& s) { return intIn(s, 0, INT_MAX); });
  c.maxRestarts = r.get<int>("max_restarts", [](auto& s) { return intIn(s, 0, INT_MAX); }).value_or(0);
  c.standbyWorkers =
      r.get<int>("standby_workers", [](auto& s) { return intIn(s, 0, kMaxStandbyWorkers); })
          .value_or(c.standbyWorkers);
  c.verdictAfter = r.get<int>("verdict_after", [](auto& s) { return intIn(s, 0, INT_MAX); })
                       .value_or(c.verdictAfter);
  c.excludeAfter = r.get<int>("exclude_after", [](auto& s) { return intIn(s, 0, INT_MAX); })
                       .value_or(c.excludeAfter);
  c.excludeWindow = r.get<std::chrono::milliseconds>("exclude_window", positiveDuration)
                        .value_or(c.excludeWindow);
  c.excludeCooldown = r.get<std::chrono::milliseconds>("exclude_cooldown", positiveDuration)
                          .value_or(c.excludeCooldown);
  c.restartScope = r.get<RestartScope>("restart_scope", [](auto& s) {
                      return oneOf(s, {"all", "failed"}) == "failed" ? RestartScope::kFailed
                                                                     : RestartScope::kAll;
                    }).value_or(c.restartScope);
  if (auto d = r.get<std::chrono::milliseconds>("monitor_interval", detail::parseDuration))
    c.monitorInterval = static_cast<double>(d->count()) / 1000.0;
  c.role = r.text("role").value_or(c.role);  // may be empty, as torchrun allows ("[0]:" prefixes)
  c.startMethod = r.get<std::string>("start_method", [](auto& s) {
                     return oneOf(s, {"spawn", "fork", "forkserver"});
                   }).value_or(c.startMethod);
  c.virtualLocalRank = r.flag("virtual_local_rank");
  if (c.virtualLocalRank) {  // before any worker starts: no two workers on one device
    const auto visible = getenv("CUDA_VISIBLE_DEVICES");
    const int gpus = visible ? 0 : countGpus(getenv);
    if (auto why = virtualDeviceShortage(c.nprocPerNode, visible, gpus)) throw UsageError(*why);
  }
  c.numaBinding = r.get<NumaPolicy>("numa_binding", parseNumaPolicy).value_or(NumaPolicy::kNone);
}

using ConfMap = std::map<std::string, std::string>;

// Repeated --rdzv-conf flags merge, a later key replacing an earlier one (torchrun keeps only the
// last flag); PET_RDZV_CONF counts only when no flag is given. Each value is parsed on its own, so
// that a syntax error names it; the keys are checked together (tls_cert in one flag may need
// tls_ca from another).
ConfMap resolveRdzvConf(Resolver& r, LaunchConfig& c) {
  ConfMap merged;
  std::string origin, text;
  for (const auto& given : r.every("rdzv_conf")) {
    origin = given.origin;
    text += (text.empty() || given.value.empty() ? "" : ",") + given.value;
    try {
      for (auto& [key, value] : detail::parseRdzvConf(given.value)) merged[key] = value;
    } catch (const ConfigError& e) {
      throw UsageError(given.origin + " '" + given.value + "': " + e.what());
    }
  }
  try {
    RendezvousSettings settings = detail::defaultRendezvousSettings(c.rdzvBackend);
    detail::applyRdzvConf(merged, settings, c.rdzvConf);
  } catch (const ConfigError& e) {
    throw UsageError(origin + " '" + text + "': " + e.what());
  }
  return merged;
}

// Returns the --rdzv-conf map: checked now (so that errors name its flag or variable), applied
// again once the backend is final (detail::finalizeRendezvous).
ConfMap resolveRendezvous(Resolver& r, LaunchConfig& c) {
  c.rdzvBackend = r.get<RdzvBackend>("rdzv_backend", detail::parseBackend).value_or(c.rdzvBackend);
  if (auto endpoint = r.find("rdzv_endpoint")) {
    c.rdzvEndpoint = endpoint->value;
    c.rdzvEndpointSource = endpoint->origin;
  }
  if (auto id = r.find("rdzv_id")) {
    c.rdzvId = id->value;
    c.rdzvIdSource = id->origin;
  }
  const ConfMap conf = resolveRdzvConf(r, c);
  c.standalone = r.flag("standalone");
  // May be empty (torchrun reads "--master_addr=" as ""); an error only where static needs it.
  c.masterAddr = r.text("master_addr").value_or(c.masterAddr);
  c.masterPort = r.get<int>("master_port", [](auto& s) { return intIn(s, 0, 65535); });
  c.localAddr = r.text("local_addr").value_or("");
  c.noSlurm = r.flag("no_slurm");
  return conf;
}

// --log-prefix (ddprun's {name} syntax), else torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE
// translated (log_prefix.hpp); an unknown variable is kept as written and warned about once.
void resolveLogPrefix(Resolver& r, LaunchConfig& c, const EnvLookup& getenv) {
  std::vector<std::string> unknown;
  std::string origin;
  if (auto prefix = r.find("log_prefix"); prefix && !prefix->value.empty()) {
    c.logPrefix = prefix->value;
    origin = prefix->origin;
    unknown = unknownVariables(c.logPrefix);
  } else if (auto torchTemplate = getenv("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE")) {
    c.logPrefix = fromTorchTemplate(*torchTemplate, unknown);
    origin = "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE";
  }
  if (unknown.empty()) return;
  std::string names, known;
  for (const auto& name : unknown) names += (names.empty() ? "" : ", ") + name;
  for (const auto& name : logPrefixVariables()) known += (known.empty() ? "" : " ") + ("{" + name + "}");
  c.warnings.push_back(origin + ": unknown variable(s) " + names +
                       " left as written in the line prefix (known: " + known +
                       (origin.starts_with("TORCHELASTIC") ? "; torchrun's names role_name, "
                                                             "hostname, group_rank too" : "") +
                       ")");
}

void resolveLogs(Resolver& r, LaunchConfig& c, const EnvLookup& getenv) {
  c.logDir = r.text("log_dir").value_or("");
  c.redirects = r.get<StreamSpec>("redirects", detail::parseStreamSpec).value_or(StreamSpec{});
  c.tee = r.get<StreamSpec>("tee", detail::parseStreamSpec).value_or(StreamSpec{});
  c.localRanksFilter = r.get<std::vector<int>>("local_ranks_filter", detail::parseRankList).value_or(std::vector<int>{});
  resolveLogPrefix(r, c, getenv);
  c.logLevel = r.get<std::string>("log_level", detail::parseLogLevel).value_or(c.logLevel);
  c.preflight = r.get<PreflightMode>("preflight", [](auto& s) {
                   const std::string mode = oneOf(s, {"warn", "strict", "off"});
                   return mode == "off" ? PreflightMode::kOff
                          : mode == "strict" ? PreflightMode::kStrict : PreflightMode::kWarn;
                 }).value_or(c.preflight);
  c.eventLogHandler = r.text("event_log_handler").value_or(c.eventLogHandler);
  c.logsSpecs = r.text("logs_specs").value_or("");
  c.duplicateStdoutFilters = detail::parseFilterList(r.text("duplicate_stdout_filters").value_or(""));
  c.duplicateStderrFilters = detail::parseFilterList(r.text("duplicate_stderr_filters").value_or(""));
}

void resolveSignals(Resolver& r, LaunchConfig& c) {
  c.signalsToHandle = r.get<std::vector<int>>("signals_to_handle", detail::parseSignalList)
                          .value_or(detail::parseSignalList(kDefaultSignals));
  c.shutdownTimeout = r.get<std::chrono::milliseconds>("shutdown_timeout", detail::parseDuration)
                          .value_or(c.shutdownTimeout);
}

void resolveHang(Resolver& r, LaunchConfig& c, const EnvLookup& getenv) {
  c.hangTimeout = r.get<std::chrono::milliseconds>("hang_timeout", [](const std::string& s) {
                     const auto d = detail::parseDuration(s);
                     if (d.count() != 0 && d < std::chrono::seconds(1))
                       throw ConfigError("must be 0 (off) or at least 1 s");
                     return d;
                   }).value_or(c.hangTimeout);
  c.fileTimer = getenv("TORCHELASTIC_ENABLE_FILE_TIMER").value_or("") == "1";
  c.timerFile = getenv("TORCHELASTIC_TIMER_FILE").value_or("");
}

void resolveStraggler(Resolver& r, LaunchConfig& c) {
  c.stragglerThreshold = r.get<double>("straggler_threshold", [](const std::string& s) {
                            std::size_t used = 0;
                            double v = -1;
                            try {
                              v = std::stod(s, &used);
                            } catch (const std::exception&) {
                              used = 0;
                            }
                            if (used != s.size() || !(v == 0 || (v > 1 && v < 1e6)))
                              throw ConfigError("must be 0 (off) or a factor more than 1, e.g. 1.5");
                            return v;
                          }).value_or(c.stragglerThreshold);
  c.stragglerWindow = r.get<std::chrono::milliseconds>("straggler_window", [](const std::string& s) {
                         const auto d = detail::parseDuration(s);
                         if (d < std::chrono::seconds(1)) throw ConfigError("must be at least 1 s");
                         return d;
                       }).value_or(c.stragglerWindow);
  c.excludeStragglers = r.flag("exclude_stragglers");
  if (c.excludeStragglers && c.stragglerThreshold == 0) {
    throw UsageError("--exclude-stragglers needs straggler detection: give --straggler-threshold "
                     "too (e.g. 1.5)");
  }
}

void resolveStatus(Resolver& r, LaunchConfig& c) {
  c.httpPort = r.get<int>("http_port", [](const std::string& s) {
                  return s == "auto" ? LaunchConfig::kHttpPortAuto : intIn(s, 0, 65535);
                }).value_or(c.httpPort);
  if (auto host = r.text("http_host"); host && !host->empty()) c.httpHost = *host;
}

void resolveEntry(Resolver& r, LaunchConfig& c, const detail::RawArgs& raw, const EnvLookup& getenv) {
  detail::EntrypointRequest request;
  request.positional = raw.entrypoint;
  request.module = r.flag("module");
  request.noPython = r.flag("no_python");
  request.runPath = r.flag("run_path");
  r.flag("use_env");  // torch.distributed.launch's switch: ddprun never appends --local-rank
  c.module = request.module;
  c.noPython = request.noPython;
  c.runPath = request.runPath;
  if (auto exec = getenv("PYTHON_EXEC"); exec && !exec->empty()) request.pythonExec = *exec;
  detail::resolveEntrypoint(request, c);
  c.pythonPath = detail::findPythonPackage(detail::executableDir());
}

void checkConsistency(const LaunchConfig& c) {
  if (c.nodeRank && *c.nodeRank >= c.maxNodes)
    throw UsageError("--node-rank " + std::to_string(*c.nodeRank) + " is outside nnodes " +
                     std::to_string(c.minNodes) + ":" + std::to_string(c.maxNodes) +
                     " (node ranks are 0.." + std::to_string(c.maxNodes - 1) + ")");
  auto check = [&](const char* flag, int rank) {
    if (rank >= c.nprocPerNode)
      throw UsageError(std::string(flag) + ": local rank " + std::to_string(rank) +
                       " does not exist (--nproc-per-node " + std::to_string(c.nprocPerNode) + ")");
  };
  for (const auto& [rank, streams] : c.redirects.perRank) check("--redirects", rank);
  for (const auto& [rank, streams] : c.tee.perRank) check("--tee", rank);
  for (int rank : c.localRanksFilter) check("--local-ranks-filter", rank);
}

}  // namespace

LaunchConfig parseCommandLine(const std::vector<std::string>& args, const EnvLookup& getenv) {
  auto raw = detail::splitCommandLine(args);
  if (raw.help) throw InfoRequested(helpText());
  if (raw.version) throw InfoRequested(versionText("ddprun"));
  LaunchConfig config;
  Resolver resolver(raw, getenv, config);
  resolveWorkers(resolver, config, getenv);
  const ConfMap rdzvConf = resolveRendezvous(resolver, config);
  resolveLogs(resolver, config, getenv);
  resolveSignals(resolver, config);
  resolveHang(resolver, config, getenv);
  resolveStraggler(resolver, config);
  resolveStatus(resolver, config);
  resolveEntry(resolver, config, raw, getenv);
  if (!config.standalone) applyEnvironmentDetection(config, getenv);  // --standalone: one node
  detail::applyStandalone(config, raw.values.contains("standalone") ? "--standalone" : "PET_STANDALONE");
  detail::finalizeRendezvous(config, rdzvConf, getenv);
  checkConsistency(config);
  if (resolver.flag("dry_run")) {
    config.explicitOptions.erase("dry_run");
    const NumaSetup numa = setupNumaBinding(config.numaBinding, config.nprocPerNode, getenv);
    throw InfoRequested(detail::describeConfig(config, &numa));
  }
  return config;
}

LaunchConfig parseCommandLine(int argc, char** argv) {
  std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
  return parseCommandLine(args, processEnv);
}

void applyEnvironmentDetection(LaunchConfig& config, const EnvLookup& getenv) {
  if (!config.noSlurm) detail::applySlurmDetection(config, getenv);
}

CliOutcome parseCommandLineOrReport(int argc, char** argv) {
  try {
    return {parseCommandLine(argc, argv), 0};
  } catch (const InfoRequested& info) {
    std::cout << info.text() << std::flush;
    return {std::nullopt, 0};
  } catch (const ConfigError& e) {
    std::cerr << "ddprun: error: " << e.what() << std::endl;
    return {std::nullopt, kUsageExitCode};
  }
}

std::string helpText() { return detail::formatHelp(); }

}  // namespace ddp
