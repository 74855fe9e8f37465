#include "launcher/cli/cli_options.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <sstream>
#include <stdexcept>

#include "launcher/cli/cli.hpp"
#include "launcher/cli/rdzv_conf.hpp"
#include "rendezvous/base/endpoint.hpp"

namespace ddp::detail {
namespace {

// Stands for the empty value of "--flag=" while CLI11 parses (a text no one types).
const std::string kEmptyValue = "\x1f(empty)\x1f";

// Dashed and underscored spellings of a torchrun long option, and PET_<DEST> as its variable.
OptionSpec torchOpt(const std::string& dest, bool isFlag, std::string metavar, std::string help,
                    std::string section, std::vector<std::string> shortNames = {}) {
  OptionSpec spec{dest, std::move(shortNames), {}, isFlag, std::move(metavar), std::move(help),
                  std::move(section)};
  std::string dashed = dest;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  spec.names.push_back("--" + dashed);
  if (dashed != dest) spec.names.push_back("--" + dest);
  std::string env = "PET_" + dest;
  std::transform(env.begin(), env.end(), env.begin(), [](unsigned char c) { return std::toupper(c); });
  spec.env.push_back(env);
  return spec;
}

OptionSpec withEnv(OptionSpec spec, std::vector<std::string> env) {
  spec.env = std::move(env);
  return spec;
}

std::string confKeys() {
  std::string keys;
  for (const auto& key : rdzvConfKeys()) keys += (keys.empty() ? "" : ", ") + key;
  return keys;
}

std::vector<OptionSpec> buildTable() {
  const std::string kNodes = "Nodes and workers", kRdzv = "Rendezvous", kEntry = "Entry point",
                    kLogs = "Logs", kSignals = "Signals and shutdown";
  return {
      torchOpt("nnodes", false, "N|MIN:MAX", "number of nodes, or MIN:MAX for an elastic job (default 1)", kNodes),
      torchOpt("nproc_per_node", false, "N|gpu|cpu|auto",
               "workers per node (default 1); gpu: one per visible GPU, an error if none; cpu: one "
               "per usable CPU; auto: GPUs if any, else CPUs", kNodes),
      torchOpt("node_rank", false, "N", "this node's rank, honoured by every backend (default assigned)", kNodes),
      torchOpt("max_restarts", false, "N", "job-wide budget of worker-group restarts after failures (default 0)", kNodes),
      torchOpt("restart_scope", false, "all|failed",
               "what a worker failure restarts: all = every worker (torchrun); failed = only the "
               "failed worker, replaced in place while the others keep running, when every worker "
               "recovers in place through worker_runtime (else all) (default all)", kNodes),
      withEnv(torchOpt("standby_workers", false, "N",
                       "with --restart-scope=failed: standby processes per node, started ahead "
                       "of a failure so that a replacement finds its program loaded and its model "
                       "built, when the workers' program can wait as one (worker_runtime); 0 = "
                       "none (default 1)",
                       kNodes),
              {"DDP_STANDBY_WORKERS"}),
      withEnv(torchOpt("verdict_after", false, "N",
                       "stop the job (exit 87) instead of restarting when the same failure, or no "
                       "step progress, repeats in N generations in a row while restarts are left; "
                       "0 = never, --max-restarts is honoured exactly as torchrun (default 0)",
                       kNodes),
              {"DDP_VERDICT_AFTER"}),
      withEnv(torchOpt("exclude_after", false, "N",
                       "leave a node out of the job for --exclude-cooldown once its workers failed "
                       "N times within --exclude-window, when the job keeps min_nodes without it "
                       "(counting spares); 0 = never, as torchrun (default 0)",
                       kNodes),
              {"DDP_EXCLUDE_AFTER"}),
      withEnv(torchOpt("exclude_window", false, "SECONDS",
                       "the window --exclude-after counts a node's failures in (default 600)",
                       kNodes),
              {"DDP_EXCLUDE_WINDOW"}),
      withEnv(torchOpt("exclude_cooldown", false, "SECONDS",
                       "how long an excluded node stays out before it joins again (default 600)",
                       kNodes),
              {"DDP_EXCLUDE_COOLDOWN"}),
      torchOpt("monitor_interval", false, "SECONDS", "accepted for compatibility; ddprun reacts to events, it does not poll", kNodes),
      torchOpt("role", false, "NAME", "worker role: ROLE_NAME and the log prefix (default 'default')", kNodes),
      torchOpt("start_method", false, "spawn|fork|forkserver", "accepted for compatibility; workers are always separate processes", kNodes),
      torchOpt("virtual_local_rank", true, "",
               "give every worker LOCAL_RANK=0 and CUDA_VISIBLE_DEVICES=<its GPU>; refused when "
               "the visible devices are fewer than the workers",
               kNodes),
      withEnv(torchOpt("numa_binding", false, "node|socket|exclusive|core-complex",
                       "bind each worker's CPUs and memory near its GPU (local rank i: GPU i; no GPU: "
                       "NUMA nodes round-robin): node = all CPUs of the GPU's NUMA node, socket = of its "
                       "socket, exclusive = the node's cores split between its workers, core-complex = "
                       "one L3 cache domain each; off unless given", kNodes), {}),
      torchOpt("rdzv_backend", false, "static|c10d|etcd|etcd-v2", "rendezvous backend (default static)", kRdzv),
      torchOpt("rdzv_endpoint", false, "HOST[:PORT]",
               "rendezvous store, e.g. a ddprund (port default: c10d " + std::to_string(kDefaultC10dPort) +
                   ", etcd " + std::to_string(kDefaultEtcdPort) +
                   "; static needs HOST:PORT; IPv6 as [addr]:port; etcd: a comma list) (default c10d "
                   "localhost:" + std::to_string(kDefaultC10dPort) + ", etcd localhost:" +
                   std::to_string(kDefaultEtcdPort) + ", static 127.0.0.1:" +
                   std::to_string(kDefaultMasterPort) + ")", kRdzv),
      torchOpt("rdzv_id", false, "ID",
               "job id shared by all nodes; becomes TORCHELASTIC_RUN_ID; a multi-node job without one "
               "takes its scheduler's (Slurm, TORCHELASTIC_RUN_ID); another job under the same id on "
               "the same store is refused (default 'none')", kRdzv),
      torchOpt("rdzv_conf", false, "KEY=VALUE,...",
               "rendezvous settings (durations in seconds, fractions ok, or 250ms): " + confKeys(), kRdzv),
      torchOpt("standalone", true, "", "one node, nothing else to start: the rendezvous store in this process, random run id", kRdzv),
      torchOpt("master_addr", false, "ADDR", "static backend: address of node 0's store (default 127.0.0.1)", kRdzv),
      torchOpt("master_port", false, "PORT",
               "static backend: port of node 0's store (default " + std::to_string(kDefaultMasterPort) + ")", kRdzv),
      torchOpt("local_addr", false, "ADDR", "address other nodes reach this node at (default detected)", kRdzv),
      withEnv(torchOpt("no_slurm", true, "", "ignore SLURM_* even inside a Slurm step", kRdzv), {"DDP_NO_SLURM"}),
      torchOpt("module", true, "", "run the entry point as a Python module: python -u -m MODULE", kEntry, {"-m"}),
      torchOpt("no_python", true, "", "run the entry point as a program, never under python", kEntry),
      torchOpt("run_path", true, "", "run the entry point as a Python script (like a .py file)", kEntry),
      withEnv(torchOpt("use_env", true, "", "accepted for torch.distributed.launch users; ddprun never passes --local-rank", kEntry), {}),
      torchOpt("log_dir", false, "DIR", "write <DIR>/<run-id>/node_<node rank>/attempt_<n>/<local_rank>/{stdout,stderr}.log, error.json "
               "(default none: a private temp dir, removed at exit unless a failure summary names "
               "files in it)", kLogs),
      torchOpt("redirects", false, "0-3|RANK:0-3,...", "worker streams to files only: 0 none, 1 stdout, 2 stderr, 3 both; or per local rank (default 0)", kLogs, {"-r"}),
      torchOpt("tee", false, "0-3|RANK:0-3,...", "worker streams to files and the console (same values as --redirects) (default 0)", kLogs, {"-t"}),
      torchOpt("local_ranks_filter", false, "RANK,...", "local ranks whose output reaches the console (default all)", kLogs),
      withEnv(torchOpt("log_prefix", false, "TEMPLATE",
                       "console line prefix with {rank} (global rank) {local_rank} {role} {host} {pid} (the "
                       "worker's) {node_rank} {restart_count}; without it torchrun's "
                       "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE (${rank} ...) is read (default '" +
                           LaunchConfig{}.logPrefix + "')", kLogs),
              {"DDP_LOG_PREFIX"}),
      withEnv(torchOpt("log_level", false, "trace|debug|info|warn|error|critical|off", "how much ddprun logs (default info)", kLogs),
              {"DDP_LOG_LEVEL"}),
      torchOpt("event_log_handler", false, "NAME", "accepted for compatibility and ignored", kLogs),
      withEnv(torchOpt("logs_specs", false, "NAME", "accepted for compatibility and ignored", kLogs), {}),
      torchOpt("duplicate_stdout_filters", false, "FILTER,...", "accepted for compatibility and ignored", kLogs),
      torchOpt("duplicate_stderr_filters", false, "FILTER,...", "accepted for compatibility and ignored", kLogs),
      torchOpt("signals_to_handle", false, "SIG,...",
               "signals forwarded to workers (default SIGTERM,SIGINT,SIGHUP,SIGQUIT; add SIGUSR1 for Slurm pre-emption)", kSignals),
      withEnv(torchOpt("shutdown_timeout", false, "SECONDS", "grace between the forwarded signal and SIGKILL (default 30)", kSignals),
              {"PET_SHUTDOWN_TIMEOUT", "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"}),
      withEnv(torchOpt("hang_timeout", false, "SECONDS",
                       "a worker without progress this long (no progress report from worker_runtime, or no "
                       "output and no CPU time) is a failure of that worker; its stacks are taken first "
                       "(off unless given; at least 1 s)", "Hang detection"),
              {"DDP_HANG_TIMEOUT"}),
      withEnv(torchOpt("straggler_threshold", false, "FACTOR",
                       "flag a rank whose compute time per step (progress beats with compute "
                       "times, as `train` sends) is over FACTOR x the job's median for "
                       "--straggler-window, in the log, /status and /metrics (default 0: off; "
                       "else more than 1, e.g. 1.5)", "Straggler detection"),
              {"DDP_STRAGGLER_THRESHOLD"}),
      withEnv(torchOpt("straggler_window", false, "SECONDS",
                       "how long a rank stays over the threshold before it is flagged, and the "
                       "span its compute time is the median of (default 30; at least 1 s)",
                       "Straggler detection"),
              {"DDP_STRAGGLER_WINDOW"}),
      withEnv(torchOpt("exclude_stragglers", true, "",
                       "a rank flagged as a straggler makes its node leave the job for "
                       "--exclude-cooldown, like a node whose workers keep failing (in place "
                       "under --restart-scope=failed), when the job keeps min_nodes without it; "
                       "needs --straggler-threshold (off unless given)",
                       "Straggler detection"),
              {"DDP_EXCLUDE_STRAGGLERS"}),
      withEnv(torchOpt("preflight", false, "warn|strict|off",
                       "checks at every rendezvous round before workers start (versions, clocks, GPUs, "
                       "the worker store's port from every node), one table on node rank 0; strict: a "
                       "flag fails the round on every node (exit 4) (default warn)", "Diagnostics"),
              {"DDP_PREFLIGHT"}),
      withEnv(torchOpt("http_port", false, "PORT|auto|0",
                       "serve this job's status page, /status and /metrics on PORT (auto: a free "
                       "port; the address is logged) (default 0: off)", "Status"),
              {"DDP_HTTP_PORT"}),
      withEnv(torchOpt("http_host", false, "ADDR",
                       "address the status pages listen on (default 127.0.0.1)", "Status"),
              {"DDP_HTTP_HOST"}),
      withEnv(torchOpt("dry_run", true, "",
                       "print the resolved configuration (flags, PET_*, Slurm) as JSON and exit 0", "Diagnostics"),
              {}),
  };
}

std::string joinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ",") + n;
  return out;
}

// The option a long name (without "=value") stands for: an exact spelling, or, as argparse
// allows, an unambiguous prefix ("--redirect" for --redirects). nullptr when nothing matches.
const OptionSpec* matchLongName(const std::string& name, const std::vector<OptionSpec>& table) {
  std::vector<const OptionSpec*> matches;
  std::string candidates;
  for (const auto& spec : table) {
    for (const auto& n : spec.names) {
      if (n == name) return &spec;
      if (!n.starts_with(name)) continue;
      candidates += (candidates.empty() ? "" : ", ") + n;
      if (std::find(matches.begin(), matches.end(), &spec) == matches.end()) matches.push_back(&spec);
    }
  }
  if (matches.size() > 1) throw UsageError("ambiguous option: " + name + " could match " + candidates);
  return matches.empty() ? nullptr : matches.front();
}

}  // namespace

std::vector<std::string> expandAbbreviations(const std::vector<std::string>& args) {
  std::vector<OptionSpec> table = optionTable();
  table.push_back({"help", {"--help"}, {}, true, "", "", ""});
  table.push_back({"version", {"--version"}, {}, true, "", "", ""});
  std::vector<std::string> out = args;
  for (std::size_t i = 0; i < out.size(); ++i) {
    const std::string& tok = out[i];
    if (tok == "--" || tok.size() < 2 || tok[0] != '-') break;  // the entry point starts here
    if (!tok.starts_with("--")) {
      bool valued = tok == "-r" || tok == "-t";  // "-r 3"; "-r3" carries its value
      i += valued ? 1 : 0;
      continue;
    }
    auto eq = tok.find('=');
    std::string name = tok.substr(0, eq);
    const OptionSpec* spec = matchLongName(name, table);
    if (!spec) continue;  // unknown: CLI11 rejects it with the original spelling
    if (std::find(spec->names.begin(), spec->names.end(), name) == spec->names.end())
      out[i] = spec->names.back() + (eq == std::string::npos ? "" : tok.substr(eq));
    if (eq != std::string::npos && eq + 1 == tok.size()) {
      // "--rdzv_id=": an empty value, as argparse reads it (CLI11 would take the next word).
      if (spec->isFlag) throw UsageError(name + "=: " + name + " takes no value");
      out[i] += kEmptyValue;
    }
    if (!spec->isFlag && eq == std::string::npos) ++i;  // skip the value
  }
  return out;
}

const std::vector<OptionSpec>& optionTable() {
  static const std::vector<OptionSpec> table = buildTable();
  return table;
}

const OptionSpec& optionSpec(const std::string& dest) {
  for (const auto& spec : optionTable())
    if (spec.dest == dest) return spec;
  throw std::out_of_range("no ddprun option with dest " + dest);
}

RawArgs splitCommandLine(const std::vector<std::string>& args) {
  CLI::App app{"ddprun", "ddprun"};
  app.set_help_flag();
  app.prefix_command();  // the first positional ends our flags; the rest belongs to the workers
  auto* help = app.add_flag("-h,--help");
  auto* version = app.add_flag("--version");
  std::vector<std::pair<const OptionSpec*, CLI::Option*>> bound;
  for (const auto& spec : optionTable()) {
    CLI::Option* opt = spec.isFlag ? app.add_flag(joinNames(spec.names))
                                   : app.add_option(joinNames(spec.names))
                                         ->type_name(spec.metavar)
                                         ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    bound.emplace_back(&spec, opt);
  }
  auto expanded = expandAbbreviations(args);
  std::vector<std::string> reversed(expanded.rbegin(), expanded.rend());  // CLI11 pops the back
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  RawArgs raw;
  raw.help = help->count() > 0;
  raw.version = version->count() > 0;
  // The last occurrence wins, as with argparse; a switch given "--flag=0" keeps its text.
  for (auto& [spec, opt] : bound) {
    if (opt->count() == 0 || opt->results().empty()) continue;
    auto& every = raw.every[spec->dest];
    for (const auto& value : opt->results()) every.push_back(value == kEmptyValue ? "" : value);
    raw.values[spec->dest] = every.back();
  }
  raw.entrypoint = app.remaining();
  if (!raw.entrypoint.empty() && raw.entrypoint.front() == "--") {
    raw.entrypoint.erase(raw.entrypoint.begin());  // "ddprun [OPTIONS] -- program args"
  } else if (!raw.entrypoint.empty() && raw.entrypoint.front().size() > 1 &&
             raw.entrypoint.front()[0] == '-') {
    throw UsageError("unrecognized argument: " + raw.entrypoint.front() +
                     " (ddprun flags go before the training script; see --help)");
  }
  return raw;
}

std::string formatHelp() {
  std::ostringstream out;
  out << "usage: ddprun [OPTIONS] TRAINING_SCRIPT|PROGRAM|MODULE [ARGS...]\n\n"
         "Start one elastic agent per node that runs the training program as N workers with\n"
         "torchrun's environment contract. A *.py entry point runs as $PYTHON_EXEC -u (default\n"
         "python3); -m runs a module; anything else runs as a program found on PATH. ARGS go to\n"
         "every worker untouched; ${local_rank} in them becomes the worker's local rank.\n\n"
         "Every multi-word flag also has an underscore spelling (--nproc_per_node). A flag that is\n"
         "not given is read from the variable shown (PET_* as torchrun; booleans 1/0, an empty value\n"
         "meaning 1); the command line wins. Inside a Slurm step the node count, node rank, endpoint\n"
         "and run id come from SLURM_* unless set (or --no-slurm).\n";
  std::string section;
  for (const auto& spec : optionTable()) {
    if (spec.section != section) {
      section = spec.section;
      out << "\n" << section << ":\n";
    }
    std::vector<std::string> shown;  // the underscore spellings are implied by the note above
    std::copy_if(spec.names.begin(), spec.names.end(), std::back_inserter(shown),
                 [](const std::string& n) { return n.find('_') == std::string::npos; });
    std::string head = "  " + joinNames(shown);
    if (!spec.metavar.empty()) head += " " + spec.metavar;
    out << head << "\n      " << spec.help;
    if (!spec.env.empty()) out << " [" << joinNames(spec.env) << "]";
    out << "\n";
  }
  out << "\nOther:\n  -h, --help\n      show this help and exit\n  --version\n      print the version and exit\n"
         "\nExit status: 0 when every worker succeeded; the root-cause worker's exit code (128+signal\n"
         "when a signal killed it) when the job failed; 128+S when ddprun got signal S; 1 when the\n"
         "rendezvous failed; 4 when --preflight=strict failed the round; 127 when a worker could not be\n"
         "started; 2 for a usage error.\n";
  return out.str();
}

}  // namespace ddp::detail
