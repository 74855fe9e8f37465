// StandbyPool (launcher/workers/standby_pool.hpp) with real processes: a standby reads the whole
// environment the agent hands it; one that dies while it waits is started again 3 times, no more;
// that budget is whole again once a standby served; a standby of another program is not taken; the
// pool's end kills the one still waiting; a standby prepares under SCHED_IDLE, every thread of it,
// and is back at SCHED_OTHER once taken; one that reads its message and ends at once served.
#include "launcher/workers/standby_pool.hpp"

#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "launcher/workers/idle_priority.hpp"

namespace ddp {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "standby-pool-test-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs the loop until `done` or 30 s.
template <class Done>
bool runUntil(boost::asio::io_context& io, Done done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_for(std::chrono::milliseconds(20));
  }
  return done();
}

// A standby: reads the message on $DDP_STANDBY and writes its entries to `out`, one per line.
WorkerSpec pythonStandby(const fs::path& out) {
  WorkerSpec spec;
  spec.argv = {"/usr/bin/python3", "-c",
               "import os, struct\n"
               "f = open(os.environ['DDP_STANDBY'], 'rb')\n"
               "n = struct.unpack('<Q', f.read(8))[0]\n"
               "data = b''\n"
               "while len(data) < n: data += f.read(n - len(data))\n"
               "open('" + out.string() + ".tmp', 'wb').write(data.replace(b'\\0', b'\\n'))\n"
               "os.rename('" + out.string() + ".tmp', '" + out.string() + "')\n"};
  spec.env = {{"PATH", "/usr/bin:/bin"}, {"RANK", "0"}, {"KEEP", "kept"}};
  return spec;
}

// The parent of `pid` (from /proc); -1 when it is gone.
pid_t parentOf(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string all;
  std::getline(stat, all);
  const auto close = all.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(all.substr(close + 2));
  char state;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// The pid of a process running the python standby's program (its command line names
// DDP_STANDBY) under one of this process's guardians; -1 when there is none yet.
pid_t execedStandby() {
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    // This test's own: a guardian (a child of this process) runs it. Another test's standby on
    // the machine (ctest -j), or one of this process's earlier pools dying (reparented to this
    // process, a subreaper), is not this pool's.
    const pid_t guardian = parentOf(pid);
    if (guardian <= 0 || guardian == ::getpid() || parentOf(guardian) != ::getpid()) continue;
    std::ifstream cmd(e.path() / "cmdline");
    const std::string line((std::istreambuf_iterator<char>(cmd)), {});
    if (line.find("DDP_STANDBY") != std::string::npos) return pid;
  }
  return -1;
}

// A temporary directory and an agent's event loop with its reaper.
struct Agent {
  TempDir dir;
  boost::asio::io_context io;
  ChildReaper reaper{io};
};

}  // namespace

TEST_CASE_METHOD(Agent, "a standby takes the whole environment it is handed", "[standby]") {
  const fs::path out = dir.path / "env";
  WorkerSpec spec = pythonStandby(out);
  StandbyPool pool(io, reaper, spec, 1);
  REQUIRE(pool.ready() == 1);
  CHECK_FALSE(pool.take({"/bin/true"}, {{"RANK", "9"}}));  // another program: not this standby
  auto taken = pool.take(spec.argv, {{"RANK", "3"}, {"PATH", "/usr/bin:/bin"}});
  REQUIRE(taken);
  CHECK(pool.ready() == 0);
  int status = -1;
  reaper.watch(taken->guardianPid, [&](pid_t, int s) { status = s; });
  REQUIRE(runUntil(io, [&] { return status != -1; }));
  const std::string env = slurp(out);
  CHECK(env == "PATH=/usr/bin:/bin\nRANK=3\n");  // the whole environment: KEEP is gone
  closeHandles(*taken);
}

TEST_CASE_METHOD(Agent, "a standby that dies while it waits is started again 3 times, no more",
                 "[standby]") {
  const fs::path starts = dir.path / "starts";
  WorkerSpec spec;
  spec.argv = {"/bin/sh", "-c", "echo started >> " + starts.string() + "; exit 3"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  StandbyPool pool(io, reaper, spec, 1);
  REQUIRE(runUntil(io, [&] { return pool.ready() == 0 && reaper.pending() == 0; }));
  io.run_for(std::chrono::milliseconds(200));  // nothing more is started
  std::ifstream in(starts);
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  CHECK(lines == 1 + StandbyPool::kMaxRestarts);
  CHECK_FALSE(pool.take(spec.argv, spec.env));
}

TEST_CASE_METHOD(Agent, "the restart budget is whole again once a standby served", "[standby]") {
  const fs::path out = dir.path / "env";
  WorkerSpec spec = pythonStandby(out);
  StandbyPool pool(io, reaper, spec, 1);
  // Three rounds of kMaxRestarts deaths, each followed by a standby that serves: 9 deaths in all,
  // more than kMaxRestarts, and the pool still has a standby after each.
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    for (int death = 0; death < StandbyPool::kMaxRestarts; ++death) {
      INFO("death " << death);
      pid_t pid = -1;
      REQUIRE(runUntil(io, [&] { return (pid = execedStandby()) > 0; }));
      REQUIRE(::kill(pid, SIGKILL) == 0);
      // Started again: another process waits (the dead one's cmdline is gone with it).
      REQUIRE(runUntil(io, [&] {
        const pid_t now = execedStandby();
        return now > 0 && now != pid && pool.ready() == 1;
      }));
    }
    auto taken = pool.take(spec.argv, {{"RANK", std::to_string(round)}});
    REQUIRE(taken);
    int status = -1;
    reaper.watch(taken->guardianPid, [&](pid_t, int s) { status = s; });
    REQUIRE(runUntil(io, [&] { return status != -1; }));
    CHECK(slurp(out) == "RANK=" + std::to_string(round) + "\n");
    closeHandles(*taken);
    fs::remove(out);
    // The next standby comes kRefillDelay after the take.
    REQUIRE(runUntil(io, [&] { return pool.ready() == 1; }));
  }
}

TEST_CASE_METHOD(Agent, "the pool's end kills a standby that still waits", "[standby]") {
  pid_t pid = -1;
  {
    StandbyPool pool(io, reaper, pythonStandby(dir.path / "never"), 1);
    REQUIRE(pool.ready() == 1);
    // The standby's pid: its guardian's only child, once it has exec'd its program (right after
    // the fork it still runs this test's image: on a busy machine for a while).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while ((pid = execedStandby()) <= 0 && std::chrono::steady_clock::now() < deadline) {
      io.run_for(std::chrono::milliseconds(10));
    }
    REQUIRE(pid > 0);
    CHECK(::kill(pid, 0) == 0);
  }
  CHECK(reaper.pending() == 0);
  // Killed with its process group and reaped by its guardian (reaped in turn by the pool).
  CHECK((::kill(pid, 0) != 0 && errno == ESRCH));
}

TEST_CASE_METHOD(Agent, "a standby prepares at idle priority and takes a worker's place at normal",
                 "[standby]") {
  if (idleReturnPolicy() != SCHED_OTHER) {
    WARN("this process cannot leave SCHED_IDLE again (no CAP_SYS_NICE, RLIMIT_NICE too low) or "
         "does not run under SCHED_OTHER: nothing to check");
    return;
  }
  // The policy of each of its threads (field 41 of /proc/self/task/<tid>/stat, one thread started
  // while it prepares), written to `before` once prepared and to `after` once it read its message.
  const fs::path before = dir.path / "before", after = dir.path / "after";
  const std::string policies =
      "repr(sorted(int(open('/proc/self/task/%s/stat' % t).read().rsplit(')', 1)[1].split()[38])"
      " for t in os.listdir('/proc/self/task')))";
  const auto write = [&](const fs::path& p) {
    return "open('" + p.string() + ".tmp', 'w').write(" + policies + ")\n" + "os.rename('" +
           p.string() + ".tmp', '" + p.string() + "')\n";
  };
  WorkerSpec spec;
  spec.argv = {"/usr/bin/python3", "-c",
               "import os, struct, threading, time\n"
               // The guardian puts it under SCHED_IDLE right after its exec; a thread started
               // from then on inherits the policy.
               "deadline = time.monotonic() + 30\n"
               "while os.sched_getscheduler(0) != os.SCHED_IDLE and time.monotonic() < deadline:\n"
               "    time.sleep(0.001)\n"
               "done = threading.Event()\n"
               "threading.Thread(target=done.wait).start()\n" + write(before) +
               "f = open(os.environ['DDP_STANDBY'], 'rb')\n"
               "f.read(struct.unpack('<Q', f.read(8))[0])\n" + write(after) + "done.set()\n"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  StandbyPool pool(io, reaper, spec, 1);
  REQUIRE(runUntil(io, [&] { return fs::exists(before); }));
  CHECK(slurp(before) == "[5, 5]");  // SCHED_IDLE, the thread it started too
  auto taken = pool.take(spec.argv, {{"RANK", "0"}});
  REQUIRE(taken);
  int status = -1;
  reaper.watch(taken->guardianPid, [&](pid_t, int s) { status = s; });
  REQUIRE(runUntil(io, [&] { return status != -1; }));
  CHECK(slurp(after) == "[0, 0]");  // SCHED_OTHER, both threads
  closeHandles(*taken);
}

TEST_CASE_METHOD(Agent, "a standby that reads its message and ends at once served", "[standby]") {
  // The standby runs SCHED_FIFO on the CPU this thread is pinned to: the hand-over's write wakes
  // it, it preempts this thread at once, reads the message and exits with 7 before the write
  // returns here. It took the message: take() returns it, and its status is the worker's.
  if (idleReturnPolicy() != SCHED_OTHER) {
    WARN("this process cannot leave SCHED_IDLE again: nothing to check");
    return;
  }
  cpu_set_t own;
  REQUIRE(::sched_getaffinity(0, sizeof own, &own) == 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &own)) ++cpu;
  const fs::path policy = dir.path / "policy";
  WorkerSpec spec;
  spec.argv = {"/usr/bin/python3", "-c",
               "import os, struct, time\n"
               "deadline = time.monotonic() + 30\n"
               "while os.sched_getscheduler(0) != os.SCHED_IDLE and time.monotonic() < deadline:\n"
               "    time.sleep(0.001)\n"
               "os.sched_setaffinity(0, {" + std::to_string(cpu) + "})\n"
               "try:\n"
               "    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))\n"
               "    got = 'fifo'\n"
               "except OSError as e:\n"
               "    got = str(e)\n"
               "open('" + policy.string() + ".tmp', 'w').write(got)\n"
               "os.rename('" + policy.string() + ".tmp', '" + policy.string() + "')\n"
               "fd = os.open(os.environ['DDP_STANDBY'], os.O_RDONLY)\n"
               "n = struct.unpack('<Q', os.read(fd, 8))[0]\n"
               "while n > 0: n -= len(os.read(fd, n))\n"
               "os._exit(7)\n"};
  spec.env = {{"PATH", "/usr/bin:/bin"}};
  StandbyPool pool(io, reaper, spec, 1);
  REQUIRE(runUntil(io, [&] { return fs::exists(policy); }));
  if (slurp(policy) != "fifo") {
    WARN("a standby cannot run SCHED_FIFO here (" << slurp(policy) << "): nothing to check");
    return;
  }
  // Blocked in its read of the FIFO (/proc/<pid>/syscall names the call it sleeps in; where
  // that file cannot be read, its SCHED_FIFO on this thread's CPU still runs it first).
  const pid_t pid = execedStandby();
  REQUIRE(pid > 0);
  const std::string reading = std::to_string(SYS_read) + " ";
  REQUIRE(runUntil(io, [&] {
    const std::string call = slurp("/proc/" + std::to_string(pid) + "/syscall");
    return call.empty() || call.rfind(reading, 0) == 0;
  }));
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  REQUIRE(::sched_setaffinity(0, sizeof one, &one) == 0);
  auto taken = pool.take(spec.argv, {{"RANK", "0"}});
  REQUIRE(::sched_setaffinity(0, sizeof own, &own) == 0);
  REQUIRE(taken);  // it ended before take() looked, having read its message
  int status = -1;
  reaper.watch(taken->guardianPid, [&](pid_t, int s) { status = s; });
  REQUIRE(runUntil(io, [&] { return status != -1; }));
  bool reported = false;
  const int worker = workerExitStatus(*taken, status, reported);
  CHECK(reported);
  CHECK((WIFEXITED(worker) && WEXITSTATUS(worker) == 7));
  closeHandles(*taken);
}

TEST_CASE("an agent that may not leave SCHED_IDLE again idles no standby", "[standby]") {
  // A child without CAP_SYS_NICE and with RLIMIT_NICE 0 (an unprivileged user's defaults): the
  // kernel lets a thread into SCHED_IDLE but not out, and the probe says so.
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    const rlimit none{0, 0};
    if (::syscall(SYS_capget, &header, data) != 0) ::_exit(2);
    data[CAP_SYS_NICE / 32].effective &= ~(1u << (CAP_SYS_NICE % 32));
    if (::syscall(SYS_capset, &header, data) != 0 || ::setrlimit(RLIMIT_NICE, &none) != 0) {
      ::_exit(2);
    }
    ::_exit(probeIdleReturnPolicy() == -1 ? 0 : 1);
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);  // 1: the probe said a standby could be moved back
}

}  // namespace ddp
