// ddprun's command line: flag spellings, PET_* precedence, entry points, validation messages,
// standalone, help/version (ddprun's own failure-handling flags: cli_additions_test.cpp). The
// environment is a map handed to the parser (nothing global).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <regex>

#include "ddp_version.hpp"
#include "rendezvous/base/build_info.hpp"
#include "launcher/cli/cli.hpp"
#include "launcher/cli/python_package.hpp"
#include "tests/launcher/cli_test_util.hpp"

using namespace cli_test;
using Strings = std::vector<std::string>;

TEST_CASE("every torchrun flag takes its dashed and underscored spelling, = or a space", "[cli]") {
  struct Case {
    std::string dest, value;
    std::function<void(const ddp::LaunchConfig&)> check;
  };
  std::vector<Case> cases = {
      {"nproc_per_node", "3", [](auto& c) { CHECK(c.nprocPerNode == 3); }},
      {"max_restarts", "4", [](auto& c) { CHECK(c.maxRestarts == 4); }},
      {"monitor_interval", "0.5", [](auto& c) { CHECK(c.monitorInterval == Approx(0.5)); }},
      {"start_method", "fork", [](auto& c) { CHECK(c.startMethod == "fork"); }},
      {"rdzv_backend", "etcd-v2", [](auto& c) { CHECK(c.rdzvBackend == ddp::RdzvBackend::kEtcdV2); }},
      {"rdzv_id", "job7", [](auto& c) { CHECK(c.rdzvId == "job7"); }},
      {"rdzv_conf", "join_timeout=5", [](auto& c) { CHECK(c.rdzv.joinTimeout == std::chrono::seconds(5)); }},
      {"log_dir", "/tmp/logs", [](auto& c) { CHECK(c.logDir == "/tmp/logs"); }},
      {"local_ranks_filter", "0", [](auto& c) { CHECK(c.localRanksFilter == std::vector<int>{0}); }},
      {"signals_to_handle", "SIGUSR1", [](auto& c) { CHECK(c.signalsToHandle == std::vector<int>{SIGUSR1}); }},
      {"shutdown_timeout", "2.5", [](auto& c) { CHECK(c.shutdownTimeout == std::chrono::milliseconds(2500)); }},
      {"local_addr", "10.0.0.7", [](auto& c) { CHECK(c.localAddr == "10.0.0.7"); }},
      {"master_addr", "10.0.0.1", [](auto& c) { CHECK(c.masterAddr == "10.0.0.1"); }},
      {"master_port", "12345", [](auto& c) { CHECK(c.masterPort == 12345); }},
      {"node_rank", "0", [](auto& c) { CHECK(c.nodeRank == 0); }},
      {"event_log_handler", "console", [](auto& c) { CHECK(c.eventLogHandler == "console"); }},
      {"logs_specs", "custom", [](auto& c) { CHECK(c.logsSpecs == "custom"); }},
      {"numa_binding", "core-complex", [](auto& c) { CHECK(c.numaBinding == ddp::NumaPolicy::kCoreComplex); }},
      {"duplicate_stdout_filters", "loss,,acc,x", [](auto& c) {
         CHECK(c.duplicateStdoutFilters == Strings{"loss,acc", "x"});
       }},
      {"duplicate_stderr_filters", "err", [](auto& c) { CHECK(c.duplicateStderrFilters == Strings{"err"}); }},
  };
  for (const auto& tc : cases) {
    std::string dashed = tc.dest;
    std::replace(dashed.begin(), dashed.end(), '_', '-');
    for (const auto& name : {"--" + dashed, "--" + tc.dest}) {
      INFO(name << " " << tc.value);
      tc.check(parse({name + "=" + tc.value, "train.py"}));
      tc.check(parse({name, tc.value, "train.py"}));
    }
  }
}

// Issue 30 item 4: two workers on one GPU is refused before any starts (torch: a ValueError).
TEST_CASE("--virtual-local-rank: fewer visible devices than workers is one line naming the rank",
          "[cli]") {
  const Strings args{"--nproc-per-node=2", "--virtual-local-rank", "x"};
  CHECK(errorOf(args, {{"CUDA_VISIBLE_DEVICES", "5"}}) ==
        "--virtual-local-rank: local rank 1 has no visible device (CUDA_VISIBLE_DEVICES=5 "
        "lists 1)");
  CHECK(parse(args, {{"CUDA_VISIBLE_DEVICES", "5,7"}}).virtualLocalRank);
  // Without --virtual-local-rank the workers share the list, as torchrun's do.
  CHECK(parse({"--nproc-per-node=2", "x"}, {{"CUDA_VISIBLE_DEVICES", "5"}}).nprocPerNode == 2);
}

TEST_CASE("switches in both spellings, short forms and abbreviations", "[cli]") {
  CHECK(parse({"--virtual-local-rank", "x"}).virtualLocalRank);
  CHECK(parse({"--virtual_local_rank", "x"}).virtualLocalRank);
  CHECK(parse({"--no_python", "x"}).noPython);
  CHECK(parse({"--run_path", "x"}).runPath);
  CHECK(parse({"-m", "pkg"}).module);
  CHECK(parse({"-r", "3", "-t1", "--nproc-per-node=2", "x"}).redirects.all == ddp::StdStreams::kBoth);
  CHECK(parse({"-t1", "x"}).tee.all == ddp::StdStreams::kStdout);
  CHECK(parse({"--redirect=2", "x"}).redirects.all == ddp::StdStreams::kStderr);  // argparse prefix
  CHECK(parse({"--nproc", "5", "x"}).nprocPerNode == 5);
  CHECK(parse({"--standalone=0", "--nnodes=2", "x"}).standalone == false);
  CHECK(parse({"--role", "", "x"}).role.empty());  // torchx-style empty role is accepted
  CHECK_THAT(errorOf({"--rdzv=x", "x"}), Catch::Contains("ambiguous option: --rdzv"));
  CHECK_THAT(errorOf({"--standalone=maybe", "x"}), Catch::Contains("--standalone 'maybe': not a boolean"));
}

TEST_CASE("defaults match torchrun's, plus implicit standalone for one node", "[cli]") {
  auto c = parse({"train.py"});
  CHECK(c.minNodes == 1);
  CHECK(c.maxNodes == 1);
  CHECK(c.nprocPerNode == 1);
  CHECK(c.maxRestarts == 0);
  CHECK(c.role == "default");
  CHECK(c.logLevel == "info");
  CHECK(c.shutdownTimeout == std::chrono::seconds(30));
  CHECK(c.signalsToHandle == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(c.standalone);  // static, no endpoint, no --master-port, one node: torchrun 2.x does this too
  CHECK(c.rdzvBackend == ddp::RdzvBackend::kC10d);
  CHECK(c.rdzvEndpoints == std::vector<ddp::Endpoint>{{"localhost", 0}});
  CHECK(c.explicitOptions.empty());
  auto multi = parse({"--nnodes=2", "--master-addr=10.0.0.1", "train.py"});
  CHECK_FALSE(multi.standalone);
  CHECK(multi.rdzvBackend == ddp::RdzvBackend::kStatic);
  CHECK(multi.rdzvEndpoints == std::vector<ddp::Endpoint>{{"10.0.0.1", 29500}});
}

TEST_CASE("PET_* fill what the command line leaves out; the command line wins", "[cli][pet]") {
  Env env = {{"PET_NPROC_PER_NODE", "3"}, {"PET_MAX_RESTARTS", "2"}, {"PET_NNODES", "2:4"},
             {"PET_RDZV_BACKEND", "c10d"}, {"PET_RDZV_ENDPOINT", "job-worker-0:23456"},
             {"PET_RDZV_ID", "pytorchjob"}, {"PET_RDZV_CONF", "last_call_timeout=1.5"}};
  auto c = parse({"train.py"}, env);
  CHECK(c.nprocPerNode == 3);
  CHECK(c.maxRestarts == 2);
  CHECK(c.minNodes == 2);
  CHECK(c.maxNodes == 4);
  CHECK(c.rdzvEndpoints == std::vector<ddp::Endpoint>{{"job-worker-0", 23456}});
  CHECK(c.rdzvEndpointSource == "PET_RDZV_ENDPOINT");
  CHECK(c.rdzvIdSource == "PET_RDZV_ID");
  CHECK(c.rdzvId == "pytorchjob");
  CHECK(c.rdzv.lastCallTimeout == std::chrono::milliseconds(1500));
  CHECK(c.explicitOptions.contains("nnodes"));
  CHECK(std::any_of(c.notes.begin(), c.notes.end(),
                    [](auto& n) { return n.find("PET_NNODES=2:4") != std::string::npos; }));

  auto cli = parse({"--nproc_per_node=5", "--max-restarts", "0", "--nnodes=3", "train.py"}, env);
  CHECK(cli.nprocPerNode == 5);
  CHECK(cli.maxRestarts == 0);
  CHECK(cli.minNodes == 3);
  CHECK(cli.rdzvId == "pytorchjob");  // still from PET_RDZV_ID
}

TEST_CASE("PET_* booleans: integer strings, and an empty value means set (Kubeflow)", "[cli][pet]") {
  CHECK(parse({"x"}, {{"PET_STANDALONE", "1"}, {"PET_NNODES", "1"}}).standalone);
  CHECK(parse({"x"}, {{"PET_STANDALONE", ""}}).standalone);
  CHECK(parse({"x"}, {{"PET_STANDALONE", "true"}}).standalone);
  auto off = parse({"x"}, {{"PET_STANDALONE", "0"}, {"PET_NNODES", "2"}});
  CHECK_FALSE(off.standalone);
  CHECK(off.rdzvBackend == ddp::RdzvBackend::kStatic);
  CHECK(parse({"tool.py"}, {{"PET_NO_PYTHON", "1"}}).command == Strings{"tool.py"});
  CHECK(parse({"pkg"}, {{"PET_MODULE", "1"}}).command == Strings{"python3", "-u", "-m", "pkg"});
  CHECK_THAT(errorOf({"x"}, {{"PET_STANDALONE", "maybe"}}),
             Catch::Contains("PET_STANDALONE 'maybe': not a boolean"));
  // An empty PET_* for an option with a value counts as unset.
  CHECK(parse({"x"}, {{"PET_NPROC_PER_NODE", ""}}).nprocPerNode == 1);
}

TEST_CASE("fallback variables: shutdown timeout, log level, log prefix template", "[cli][pet]") {
  CHECK(parse({"x"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}}).shutdownTimeout == std::chrono::seconds(7));
  CHECK(parse({"x"}, {{"TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "7"}, {"PET_SHUTDOWN_TIMEOUT", "3"}}).shutdownTimeout ==
        std::chrono::seconds(3));
  CHECK(parse({"--shutdown-timeout=0.25", "x"}, {{"PET_SHUTDOWN_TIMEOUT", "3"}}).shutdownTimeout ==
        std::chrono::milliseconds(250));
  CHECK(parse({"x"}, {{"DDP_LOG_LEVEL", "warning"}}).logLevel == "warn");
  CHECK(parse({"--log-level=debug", "x"}, {{"DDP_LOG_LEVEL", "error"}}).logLevel == "debug");
  CHECK(parse({"x"}, {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "[${role_name}${rank}|${local_rank}]"}})
            .logPrefix == "[{role}{rank}|{local_rank}]");
  CHECK(parse({"--log-prefix={host}:{rank}", "x"}).logPrefix == "{host}:{rank}");
  CHECK_THAT(errorOf({"x"}, {{"DDP_LOG_LEVEL", "loud"}}), Catch::Contains("DDP_LOG_LEVEL 'loud'"));
}

TEST_CASE("entry points: .py, -m, --no-python, programs, --run-path", "[cli][entry]") {
  auto py = parse({"--nproc-per-node=2", "train.py", "--epochs", "3", "--lr=0.1"});
  CHECK(py.command == Strings{"python3", "-u", "train.py", "--epochs", "3", "--lr=0.1"});
  CHECK(py.entrypointKind == ddp::EntrypointKind::kPythonScript);
  CHECK(py.entrypointName == "train.py");
  auto exec = parse({"train.py"}, {{"PYTHON_EXEC", "/usr/bin/python3"}});
  CHECK(exec.command.front() == "/usr/bin/python3");
  auto mod = parse({"-m", "pkg.main", "--cfg", "a.yaml"});
  CHECK(mod.command == Strings{"python3", "-u", "-m", "pkg.main", "--cfg", "a.yaml"});
  CHECK(mod.entrypointKind == ddp::EntrypointKind::kPythonModule);
  auto program = parse({"train", "--config", "x"});
  CHECK(program.command == Strings{"train", "--config", "x"});
  CHECK(program.entrypointKind == ddp::EntrypointKind::kProgram);
  CHECK(parse({"--no-python", "tool.py", "a"}).command == Strings{"tool.py", "a"});
  CHECK(parse({"--run-path", "script", "a"}).command == Strings{"python3", "-u", "script", "a"});
  CHECK(parse({"--run-path", "--no-python", "s.py"}).command == Strings{"python3", "-u", "s.py"});
  // Worker arguments are never ddprun's, even when they look like ddprun flags.
  CHECK(parse({"train", "--nproc-per-node", "9", "--help"}).command ==
        Strings{"train", "--nproc-per-node", "9", "--help"});
  CHECK(parse({"train", "--local_rank=${local_rank}", "--gpu", "${local_rank}"}).command ==
        Strings{"train", "--local_rank=${local_rank}", "--gpu", "${local_rank}"});
  CHECK(parse({"--nproc-per-node=2", "--", "train", "--", "-x"}).command == Strings{"train", "--", "-x"});
  CHECK_THAT(errorOf({"-m", "--no-python", "x"}), Catch::Contains("-m/--module and --no-python"));
  CHECK_THAT(errorOf({"--nproc-per-node=2"}), Catch::Contains("training script, module or program is missing"));
}

TEST_CASE("bad values are rejected with the flag, the value and what was expected", "[cli][errors]") {
  using Catch::Contains;
  CHECK_THAT(errorOf({"--nnodes=0", "x"}), Contains("--nnodes '0': need 0 < MIN <= MAX"));
  CHECK_THAT(errorOf({"--nnodes=4:2", "x"}), Contains("--nnodes '4:2': need 0 < MIN <= MAX, got MIN=4 MAX=2"));
  CHECK_THAT(errorOf({"--nnodes=1:2:3", "x"}), Contains("\"MIN:MAX\" format"));
  CHECK_THAT(errorOf({"--nnodes=two", "x"}), Contains("--nnodes 'two'"));
  CHECK_THAT(errorOf({"--nproc-per-node=0", "x"}), Contains("--nproc-per-node '0': expected a positive integer, 'gpu', 'cpu' or 'auto'"));
  CHECK_THAT(errorOf({"--nproc-per-node=many", "x"}), Contains("--nproc-per-node 'many'"));
  CHECK_THAT(errorOf({"--rdzv-conf=a=", "x"}), Contains("--rdzv-conf 'a=': option 'a' must have a value"));
  CHECK_THAT(errorOf({"--rdzv-conf==1", "x"}), Contains("<key1>=<value1>"));
  CHECK_THAT(errorOf({"--rdzv-conf=join_timeout=soon", "x"}), Contains("join_timeout=soon: not a non-negative duration"));
  CHECK_THAT(errorOf({"--rdzv-conf=is_host=maybe", "x"}), Contains("is_host=maybe: not a boolean"));
  CHECK_THAT(errorOf({"--rdzv-conf=read_timeout=0", "x"}), Contains("read_timeout=0: must be > 0"));
  CHECK_THAT(errorOf({"--tee=4", "x"}), Contains("--tee '4': stream selector '4' is not 0, 1, 2 or 3"));
  CHECK_THAT(errorOf({"--tee=0:5", "x"}), Contains("--tee '0:5'"));
  CHECK_THAT(errorOf({"--redirects=12", "x"}), Contains("--redirects '12': expected 0, 1, 2, 3 or a map"));
  CHECK_THAT(errorOf({"--redirects=a:1", "x"}), Contains("'a:1' is not LOCAL_RANK:0..3"));
  CHECK_THAT(errorOf({"--nproc-per-node=2", "--tee=0:1,2:1", "x"}), Contains("--tee: local rank 2 does not exist"));
  CHECK_THAT(errorOf({"--local-ranks-filter=0,a", "x"}), Contains("'a' is not a local rank"));
  CHECK_THAT(errorOf({"--signals-to-handle=SIGFOO", "x"}), Contains("unknown signal 'SIGFOO'"));
  CHECK_THAT(errorOf({"--signals-to-handle=SIGKILL", "x"}), Contains("SIGKILL cannot be caught"));
  CHECK_THAT(errorOf({"--shutdown-timeout=-1", "x"}), Contains("--shutdown-timeout '-1'"));
  CHECK_THAT(errorOf({"--master-port=70000", "x"}), Contains("--master-port '70000': must be between 0 and 65535"));
  CHECK_THAT(errorOf({"--max-restarts=-1", "x"}), Contains("--max-restarts '-1'"));
  CHECK_THAT(errorOf({"--rdzv-backend=zookeeper", "x"}), Contains("unknown backend"));
  CHECK_THAT(errorOf({"--start-method=thread", "x"}), Contains("must be one of spawn, fork, forkserver"));
  CHECK_THAT(errorOf({"--bogus", "x"}), Contains("unrecognized argument: --bogus"));
  CHECK_THAT(errorOf({"--nnodes"}), Contains("--nnodes"));
  CHECK_THAT(errorOf({"--nnodes=2", "--node-rank=2", "x"}), Contains("--node-rank 2 is outside nnodes 2:2"));
  CHECK_THAT(errorOf({"--standalone", "--nnodes=2", "x"}), Contains("--standalone runs exactly one node"));
  CHECK_THAT(errorOf({"--nnodes=2", "x"}, {{"PET_STANDALONE", "1"}}),
             Contains("PET_STANDALONE runs exactly one node"));
  CHECK_THAT(errorOf({"--nnodes=2", "--rdzv-backend=c10d", "x"}), Contains("--rdzv-endpoint is required"));
  CHECK_THAT(errorOf({"--rdzv-backend=c10d", "--rdzv-endpoint=head:99999", "x"}), Contains("port must be an integer"));
  CHECK_THAT(errorOf({"x"}, {{"PET_NNODES", "0"}}), Contains("PET_NNODES '0'"));
}

TEST_CASE("rdzv-conf typed values accept fractional seconds and ms", "[cli]") {
  auto c = parse({"--rdzv-backend=c10d", "--rdzv-endpoint=h", "--rdzv-conf",
                  "join_timeout=2.5, last_call_timeout=250ms,close_timeout=1s,heartbeat_timeout=0.5,"
                  "keep_alive_interval=0.1,keep_alive_max_attempt=4,read_timeout=9,is_host=false",
                  "x"});
  CHECK(c.rdzv.joinTimeout == std::chrono::milliseconds(2500));
  CHECK(c.rdzv.lastCallTimeout == std::chrono::milliseconds(250));
  CHECK(c.rdzv.closeTimeout == std::chrono::seconds(1));
  CHECK(c.rdzv.heartbeatTimeout == std::chrono::milliseconds(500));
  CHECK(c.rdzv.keepAliveInterval == std::chrono::milliseconds(100));
  CHECK(c.rdzv.keepAliveMaxAttempt == 4);
  CHECK(c.rdzvConf.readTimeout == std::chrono::seconds(9));
  CHECK(c.rdzvConf.isHost == false);
  CHECK(c.rdzvEndpoints == std::vector<ddp::Endpoint>{{"h", 29400}});
  // torchrun's "timeout" key (read only by static/etcd there) sets the join timeout here.
  CHECK(parse({"--rdzv-conf=timeout=60", "x"}).rdzv.joinTimeout == std::chrono::seconds(60));
  CHECK(parse({"--rdzv-conf=timeout=60,join_timeout=5", "x"}).rdzv.joinTimeout == std::chrono::seconds(5));
}

TEST_CASE("tee, redirects, filters and signals", "[cli]") {
  auto c = parse({"--nproc-per-node=13", "-t", "0:1,12:3", "--local-ranks-filter=3,0,3", "x"});
  CHECK(c.tee.forRank(0) == ddp::StdStreams::kStdout);
  CHECK(c.tee.forRank(12) == ddp::StdStreams::kBoth);
  CHECK(c.tee.forRank(5) == ddp::StdStreams::kNone);
  CHECK(c.localRanksFilter == std::vector<int>{0, 3});
  auto s = parse({"--signals-to-handle=SIGTERM, usr1,SIGUSR2,10,TERM", "x"});
  CHECK(s.signalsToHandle == std::vector<int>{SIGTERM, SIGUSR1, SIGUSR2});
}

TEST_CASE("standalone: c10d on localhost:0 with a fresh uuid run id", "[cli]") {
  auto a = parse({"--standalone", "--rdzv-backend=static", "--rdzv-endpoint=far:1", "x"});
  auto b = parse({"--standalone", "x"});
  CHECK(a.standalone);
  CHECK(a.rdzvBackend == ddp::RdzvBackend::kC10d);
  CHECK(a.rdzvEndpoint.empty());
  CHECK(a.rdzvEndpoints == std::vector<ddp::Endpoint>{{"localhost", 0}});
  std::regex uuid("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  CHECK(std::regex_match(a.rdzvId, uuid));
  CHECK(a.rdzvId != b.rdzvId);
  CHECK(parse({"--standalone", "--rdzv-id=mine", "x"}).rdzvId == "mine");
}

TEST_CASE("endpoints: IPv6, default ports per backend", "[cli]") {
  auto v6 = parse({"--nnodes=2", "--rdzv-backend=c10d", "--rdzv-endpoint=[fe80::1]:29401", "--rdzv-id=j", "x"});
  CHECK(v6.rdzvEndpoints == std::vector<ddp::Endpoint>{{"fe80::1", 29401}});
  CHECK(parse({"--rdzv-backend=etcd", "--rdzv-endpoint=etcd1", "x"}).rdzvEndpoints.at(0).port == 2379);
  CHECK(parse({"--rdzv-backend=c10d", "--rdzv-endpoint=[::1]", "x"}).rdzvEndpoints.at(0).host == "::1");
  auto st = parse({"--master-addr=10.1.1.1", "--master-port=2333", "x"});
  CHECK_FALSE(st.standalone);
  CHECK(st.rdzvEndpoints == std::vector<ddp::Endpoint>{{"10.1.1.1", 2333}});
}

TEST_CASE("--help and --version are not errors", "[cli]") {
  try {
    parse({"--help"});
    FAIL("no InfoRequested");
  } catch (const ddp::InfoRequested& info) {
    for (const char* flag : {"--nnodes", "--nproc-per-node", "--rdzv-conf", "--standalone", "--tee",
                             "--redirects", "--signals-to-handle", "--shutdown-timeout", "--no-slurm",
                             "--log-prefix", "--duplicate-stdout-filters", "PET_NPROC_PER_NODE"})
      CHECK_THAT(info.text(), Catch::Contains(flag));
    CHECK_THAT(info.text(), Catch::Contains("accepted for compatibility and ignored"));
  }
  try {
    parse({"--version"}, {{"PET_NNODES", "broken"}});
    FAIL("no InfoRequested");
  } catch (const ddp::InfoRequested& info) {
    CHECK(info.text() == ddp::versionText("ddprun"));
    CHECK_THAT(info.text(), Catch::StartsWith(std::string("ddprun ") + DDP_VERSION_STRING + "\n"));
    CHECK_THAT(info.text(), Catch::Contains("\ncommit " + std::string(ddp::buildCommit()) + "\n"));
    CHECK_THAT(info.text(), Catch::Contains("torch TCPStore dialects: 1.13/2.0 (v1a), 2.1 (v1b), "
                                            "2.2+ (v2)\n"));
  }
  CHECK_THROWS_AS(parse({"-h"}), ddp::InfoRequested);
  try {
    parse({"--dry-run", "--nproc_per_node=2", "train.py", "--x"}, {{"PET_MAX_RESTARTS", "3"}});
    FAIL("no InfoRequested");
  } catch (const ddp::InfoRequested& info) {
    CHECK_THAT(info.text(), Catch::Contains("\"nproc_per_node\": 2"));
    CHECK_THAT(info.text(), Catch::Contains("\"max_restarts\": 3"));
    CHECK_THAT(info.text(), Catch::Contains("\"train.py\""));
  }
  CHECK_THROWS_AS(parse({"--dry-run", "--nnodes=0", "x"}), ddp::UsageError);  // still validated
}

TEST_CASE("main's view: exit 0 for --version, 2 and one line for a usage error", "[cli]") {
  std::ostringstream out, err;
  auto* oldOut = std::cout.rdbuf(out.rdbuf());
  auto* oldErr = std::cerr.rdbuf(err.rdbuf());
  std::vector<std::string> storage = {"ddprun", "--version"};
  std::vector<char*> argv = {storage[0].data(), storage[1].data()};
  auto version = ddp::parseCommandLineOrReport(2, argv.data());
  storage = {"ddprun", "--nnodes=0", "train"};
  argv = {storage[0].data(), storage[1].data(), storage[2].data()};
  auto bad = ddp::parseCommandLineOrReport(3, argv.data());
  std::cout.rdbuf(oldOut);
  std::cerr.rdbuf(oldErr);
  CHECK(version.exitCode == 0);
  CHECK_FALSE(version.config);
  CHECK(out.str() == ddp::versionText("ddprun"));
  CHECK(bad.exitCode == ddp::kUsageExitCode);
  CHECK(bad.exitCode == 2);
  CHECK(err.str() == "ddprun: error: --nnodes '0': need 0 < MIN <= MAX, got MIN=0 MAX=0\n");
}

TEST_CASE("an integer too large for any integer flag is out of range, not 'not an integer'",
          "[cli]") {
  CHECK(errorOf({"--verdict-after=2147483648", "x"}) ==
        "--verdict-after '2147483648': must be between 0 and 2147483647");
  CHECK(errorOf({"--max-restarts=99999999999999999999", "x"}) ==
        "--max-restarts '99999999999999999999': must be between 0 and 2147483647");
  CHECK_THAT(errorOf({"--master-port=70000", "x"}),
             Catch::Contains("--master-port '70000': must be between 0 and 65535"));
  CHECK_THAT(errorOf({"--nnodes=99999999999", "x"}),
             Catch::Contains("--nnodes '99999999999': MIN and MAX must be between 1 and 2147483647"));
  CHECK_THAT(errorOf({"--nnodes=1:99999999999", "x"}),
             Catch::Contains("MIN and MAX must be between 1 and 2147483647"));
  CHECK_THAT(errorOf({"--nproc-per-node=2147483648", "x"}),
             Catch::Contains("--nproc-per-node '2147483648': must be between 1 and 65536"));
  CHECK_THAT(errorOf({"--nproc-per-node=70000", "x"}),
             Catch::Contains("--nproc-per-node '70000': must be between 1 and 65536"));
}

TEST_CASE("the ddprun Python package is found beside the executable, build tree first",
          "[cli][python]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("ddprun-pypkg-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "bin");
  CHECK(ddp::detail::findPythonPackage((root / "bin").string()).empty());  // none: PYTHONPATH as is
  CHECK(ddp::detail::findPythonPackage("").empty());
  auto plant = [&](const fs::path& folder) {
    fs::create_directories(folder / "ddprun");
    std::ofstream(folder / "ddprun" / "__init__.py") << "\n";
  };
  fs::create_directories(root / "python" / "ddprun");  // a folder without __init__.py: not it
  CHECK(ddp::detail::findPythonPackage((root / "bin").string()).empty());
  plant(root / "lib" / "ddprun" / "python");  // installed: <prefix>/lib/ddprun/python
  CHECK(ddp::detail::findPythonPackage((root / "bin").string()) ==
        (root / "lib" / "ddprun" / "python").string());
  plant(root / "python");  // the build tree's build/python wins
  CHECK(ddp::detail::findPythonPackage((root / "bin").string()) == (root / "python").string());
  CHECK(ddp::detail::executableDir() == fs::read_symlink("/proc/self/exe").parent_path().string());
  fs::remove_all(root);
}
