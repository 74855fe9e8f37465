// ddprun end to end on one node: the env contract, restarts, the failure summary and exit codes,
// signals to workers and to ddprun, SIGKILL of ddprun, logs, Python entry points.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include "launcher_test_util.hpp"

namespace ddp {
namespace {

using namespace std::chrono_literals;

// ddprun (or `program`) in a child process, stdout/stderr to files; killed and reaped on
// destruction.
class Ddprun {
 public:
  Ddprun(const std::string& dir, std::vector<std::string> args,
         const std::map<std::string, std::string>& env = {}, const std::string& program = "ddprun")
      : out_(dir + "/" + program + ".out"), err_(dir + "/" + program + ".err") {
    args.insert(args.begin(), test::binDir() + "/" + program);
    pid_ = ::fork();
    if (pid_ == 0) {
      // In its own process group with default dispositions, as a shell with job control starts
      // a command: the test's signals then come from outside ddprun's group (not relays).
      ::setpgid(0, 0);
      for (int sig : {SIGINT, SIGQUIT, SIGHUP, SIGTERM}) ::signal(sig, SIG_DFL);
      const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1);
      ::dup2(e, 2);
      for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(126);
    }
  }
  ~Ddprun() {
    if (code_) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  // ddprun's exit code (128+signal if killed); -1 after `budget`.
  int wait(std::chrono::milliseconds budget = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + budget;
    while (!code_ && std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      } else {
        std::this_thread::sleep_for(5ms);
      }
    }
    return code_.value_or(-1);
  }
  pid_t pid() const { return pid_; }
  std::string out() const { return test::readFile(out_); }
  std::string err() const { return test::readFile(err_); }

 private:
  std::string out_, err_;
  pid_t pid_ = -1;
  std::optional<int> code_;
};

std::map<std::string, std::string> parseEnv(const std::string& path) {
  std::map<std::string, std::string> env;
  for (const auto& line : test::lines(test::readFile(path))) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return env;
}

std::vector<std::string> perRank(const std::string& base, int n) {
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r) out.push_back(base + "." + std::to_string(r));
  return out;
}

std::vector<pid_t> readPids(const std::string& base, int n) {
  std::vector<pid_t> pids;
  for (const auto& f : perRank(base, n)) pids.push_back(std::stoi(test::readFile(f)));
  return pids;
}

}  // namespace

TEST_CASE("every worker gets torchrun's env contract", "[ddprun]") {
  const auto dir = test::scratchDir("env");
  Ddprun run(dir,
             {"--standalone", "--nproc-per-node=4", "--max-restarts=2", "--rdzv-id=job42",
              "--log-dir=" + dir + "/logs", test::workerBin(), "--env-file", dir + "/env"},
             {{"DDP_INHERITED_PROBE", "kept"}});
  REQUIRE(run.wait() == 0);
  std::set<std::string> ports;
  for (int lr = 0; lr < 4; ++lr) {
    auto env = parseEnv(dir + "/env." + std::to_string(lr));
    INFO("local rank " << lr);
    CHECK(env["RANK"] == std::to_string(lr));
    CHECK(env["LOCAL_RANK"] == std::to_string(lr));
    CHECK(env["ROLE_RANK"] == std::to_string(lr));
    CHECK(env["WORLD_SIZE"] == "4");
    CHECK(env["LOCAL_WORLD_SIZE"] == "4");
    CHECK(env["ROLE_WORLD_SIZE"] == "4");
    CHECK(env["GROUP_RANK"] == "0");
    CHECK(env["GROUP_WORLD_SIZE"] == "1");
    CHECK(env["ROLE_NAME"] == "default");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "0");
    CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "2");
    CHECK(env["TORCHELASTIC_RUN_ID"] == "job42");
    CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "True");
    CHECK(env["TORCHELASTIC_ERROR_FILE"] ==
          dir + "/logs/job42/node_0/attempt_0/" + std::to_string(lr) + "/error.json");
    CHECK(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1");
    CHECK(env["OMP_NUM_THREADS"] == "1");
    CHECK(env["DDP_INHERITED_PROBE"] == "kept");
    ports.insert(env["MASTER_PORT"]);
  }
  REQUIRE(ports.size() == 1);
  CHECK(std::stoi(*ports.begin()) > 0);
}

TEST_CASE("a failure is restarted with the next generation, then succeeds", "[ddprun]") {
  const auto dir = test::scratchDir("restart");
  Ddprun run(dir, {"--standalone", "--nproc-per-node=2", "--max-restarts=3", test::workerBin(),
                   "--fail-rank", "1", "--fail-until-attempt", "2", "--exit", "5", "--env-file",
                   dir + "/env"});
  REQUIRE(run.wait() == 0);
  CHECK(parseEnv(dir + "/env.0")["TORCHELASTIC_RESTART_COUNT"] == "2");
  CHECK(parseEnv(dir + "/env.1")["TORCHELASTIC_RESTART_COUNT"] == "2");
  CHECK(run.err().find("FAILED") == std::string::npos);
}

TEST_CASE("spent restarts print the summary and exit with the root cause's code", "[ddprun]") {
  const auto dir = test::scratchDir("exhausted");
  Ddprun run(dir,
             {"--standalone", "--nproc-per-node=3", "--max-restarts=1", test::workerBin(),
              "--fail-rank", "2", "--exit", "7", "--error-message", "out of cheese", "--wait"});
  REQUIRE(run.wait() == 7);
  const auto err = run.err();
  INFO(err);
  CHECK(err.find("ddp_test_worker FAILED") != std::string::npos);
  const auto root = err.find("Root Cause (first observed failure):");
  REQUIRE(root != std::string::npos);
  const std::string rootPart = err.substr(root);
  CHECK(rootPart.find("rank      : 2 (local_rank: 2)") != std::string::npos);
  CHECK(rootPart.find("exitcode  : 7") != std::string::npos);
  CHECK(rootPart.find("RuntimeError: out of cheese") != std::string::npos);
  CHECK(rootPart.find("rank 2 failing at attempt 1") != std::string::npos);
  CHECK(err.find("stopped by ddprun") != std::string::npos);  // the peers it stopped
}

TEST_CASE("a worker killed by SIGKILL is named in the summary", "[ddprun]") {
  const auto dir = test::scratchDir("killworker");
  const std::string ready = dir + "/ready";
  Ddprun run(dir, {"--standalone", "--nproc-per-node=2", test::workerBin(), "--wait",
                   "--ready-file", ready});
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  ::kill(readPids(ready, 2)[1], SIGKILL);
  REQUIRE(run.wait() == 128 + SIGKILL);
  const auto err = run.err();
  INFO(err);
  CHECK(err.find("exitcode  : -9 (SIGKILL)") != std::string::npos);
}

TEST_CASE("SIGTERM to ddprun reaches every worker; ddprun exits 143 with nothing left",
          "[ddprun]") {
  const auto dir = test::scratchDir("sigterm");
  const std::string ready = dir + "/ready", sig = dir + "/sig";
  Ddprun run(dir, {"--standalone", "--nproc-per-node=3", test::workerBin(), "--wait",
                   "--ready-file", ready, "--signal-file", sig});
  REQUIRE(test::waitForFiles(perRank(ready, 3)));
  const auto pids = readPids(ready, 3);
  ::kill(run.pid(), SIGTERM);
  REQUIRE(run.wait() == 143);
  for (const auto& f : perRank(sig, 3)) CHECK(test::readFile(f) == "SIGTERM");
  for (pid_t pid : pids) CHECK(test::waitForPidGone(pid, 5s));
}

TEST_CASE("a second SIGINT kills workers that ignore the first", "[ddprun]") {
  const auto dir = test::scratchDir("sigint");
  const std::string ready = dir + "/ready";
  Ddprun run(dir, {"--standalone", "--nproc-per-node=2", "--shutdown-timeout=120",
                   test::workerBin(), "--wait", "--ignore-int", "--ready-file", ready});
  REQUIRE(test::waitForFiles(perRank(ready, 2)));
  ::kill(run.pid(), SIGINT);
  REQUIRE(run.wait(300ms) == -1);  // the workers ignore it; ddprun keeps waiting
  ::kill(run.pid(), SIGINT);
  CHECK(run.wait(30s) == 128 + SIGINT);
}

TEST_CASE("SIGKILL of ddprun takes every worker with it", "[ddprun]") {
  const auto dir = test::scratchDir("killagent");
  const std::string ready = dir + "/ready";
  Ddprun run(dir, {"--standalone", "--nproc-per-node=3", test::workerBin(), "--wait",
                   "--ignore-term", "--ready-file", ready});
  REQUIRE(test::waitForFiles(perRank(ready, 3)));
  const auto pids = readPids(ready, 3);
  ::kill(run.pid(), SIGKILL);
  CHECK(run.wait() == 128 + SIGKILL);
  for (pid_t pid : pids) CHECK(test::waitForPidGone(pid, 10s));
}

TEST_CASE("log files, tee, prefixes and the local-ranks filter", "[ddprun]") {
  const auto dir = test::scratchDir("logs");
  Ddprun run(
      dir, {"--standalone", "--nproc-per-node=2", "--rdzv-id=logjob", "--log-dir=" + dir + "/logs",
            "--redirects=3", "--tee=1", "--local-ranks-filter=1", "--log-prefix={host}/{rank}> ",
            test::workerBin(), "--print", "3"});
  REQUIRE(run.wait() == 0);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  const std::string p = std::string(host) + "/1> ";
  CHECK(test::lines(run.out()) ==
        std::vector<std::string>{p + "out 1 line 0", p + "out 1 line 1", p + "out 1 line 2"});
  CHECK(run.err().find("err 0 line") == std::string::npos);  // stderr redirected, not teed
  for (int lr = 0; lr < 2; ++lr) {
    const std::string base = dir + "/logs/logjob/node_0/attempt_0/" + std::to_string(lr);
    const std::string n = std::to_string(lr);
    CHECK(test::readFile(base + "/stdout.log") ==
          "out " + n + " line 0\nout " + n + " line 1\nout " + n + " line 2\n");
    CHECK(test::lines(test::readFile(base + "/stderr.log")).size() == 3);
  }
}

TEST_CASE("the default prefix is [<role><global rank>]:", "[ddprun]") {
  const auto dir = test::scratchDir("prefix");
  Ddprun run(dir, {"--standalone", "--nproc-per-node=2", "--role=trainer", test::workerBin(),
                   "--print", "1"});
  REQUIRE(run.wait() == 0);
  auto lines = test::lines(run.out());
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{"[trainer0]:out 0 line 0", "[trainer1]:out 1 line 0"});
}

TEST_CASE("torchrun's prefix template: ${hostname} and the worker's ${pid} expanded", "[ddprun]") {
  const auto dir = test::scratchDir("torchprefix");
  const std::string ready = dir + "/ready";
  Ddprun run(dir, {"--standalone", "--nproc-per-node=2", test::workerBin(), "--ready-file", ready,
                   "--print", "1"},
             {{"TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE", "${hostname}:${rank}:${pid}:$$${nope}: "}});
  REQUIRE(run.wait() == 0);
  const auto pids = readPids(ready, 2);
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  auto lines = test::lines(run.out());
  std::sort(lines.begin(), lines.end());
  CHECK(lines == std::vector<std::string>{
                     std::string(host) + ":0:" + std::to_string(pids[0]) + ":$${nope}: out 0 line 0",
                     std::string(host) + ":1:" + std::to_string(pids[1]) + ":$${nope}: out 1 line 0"});
  // The unknown variable is one warning at start.
  CHECK(run.err().find("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE: unknown variable(s) nope") !=
        std::string::npos);
}

TEST_CASE("a warning at start is printed once, not again at every restart", "[ddprun]") {
  const auto dir = test::scratchDir("warnonce");
  Ddprun run(dir, {"--standalone", "--nproc-per-node=1", "--max-restarts=2", "--log-prefix={nope}",
                   test::workerBin(), "--exit", "3", "--fail-until-attempt", "2"});
  REQUIRE(run.wait() == 0);  // generations 0 and 1 fail, generation 2 succeeds
  const std::string err = run.err();
  const std::string warning = "unknown variable(s) nope";
  std::size_t count = 0;
  for (auto at = err.find(warning); at != std::string::npos; at = err.find(warning, at + 1)) {
    ++count;
  }
  CHECK(count == 1);
}

TEST_CASE("a program that does not exist is one clear error", "[ddprun]") {
  const auto dir = test::scratchDir("missing");
  Ddprun run(dir, {"--standalone", "--nproc-per-node=2", "--no-python", dir + "/nope"});
  CHECK(run.wait() == 127);
  CHECK(run.err().find("cannot run") != std::string::npos);
}

TEST_CASE("c10d against an external ddprund: rendezvous there, a separate worker store",
          "[ddprun]") {
  const auto dir = test::scratchDir("c10d");
  Ddprun daemon(dir, {"--port", "0", "--port-file", dir + "/port"}, {}, "ddprund");
  REQUIRE(test::waitForFiles({dir + "/port"}));
  std::string port = test::readFile(dir + "/port");
  port.erase(port.find_last_not_of(" \n") + 1);
  Ddprun run(dir, {"--nnodes=1", "--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:" + port,
                   "--rdzv-id=c10djob", "--nproc-per-node=2", test::workerBin(), "--env-file",
                   dir + "/env"});
  REQUIRE(run.wait() == 0);
  const auto env = parseEnv(dir + "/env.1");
  CHECK(env.at("RANK") == "1");
  CHECK(env.at("TORCHELASTIC_RUN_ID") == "c10djob");
  CHECK_FALSE(env.at("MASTER_ADDR").empty());
  CHECK(env.at("MASTER_PORT") != port);
}

TEST_CASE("a .py entry point runs under $PYTHON_EXEC -u; -m runs a module", "[ddprun]") {
  const auto dir = test::scratchDir("python");
  const std::string script = dir + "/probe.py";
  {
    std::ofstream(script) << "import os, sys\n"
                             "open(sys.argv[1] + '.' + os.environ['LOCAL_RANK'], 'w').write(\n"
                             "    os.environ['RANK'] + ' ' + os.environ['WORLD_SIZE'] + ' ' +\n"
                             "    str(int('-u' in sys.orig_argv)) + ' ' + sys.argv[2])\n";
    std::filesystem::create_directories(dir + "/pkg");
    std::filesystem::copy_file(script, dir + "/pkg/probe_mod.py");
  }
  const std::map<std::string, std::string> env = {{"PYTHON_EXEC", "/usr/bin/python3"},
                                                  {"PYTHONPATH", dir + "/pkg"}};
  SECTION("script") {
    Ddprun run(dir, {"--standalone", "--nproc-per-node=2", script, dir + "/out", "lr${local_rank}"},
               env);
    REQUIRE(run.wait() == 0);
    CHECK(test::readFile(dir + "/out.0") == "0 2 1 lr0");
    CHECK(test::readFile(dir + "/out.1") == "1 2 1 lr1");
  }
  SECTION("module") {
    Ddprun run(dir, {"--standalone", "--nproc-per-node=2", "-m", "probe_mod", dir + "/mod", "x"},
               env);
    REQUIRE(run.wait() == 0);
    CHECK(test::readFile(dir + "/mod.1") == "1 2 1 x");
  }
}

}  // namespace ddp
