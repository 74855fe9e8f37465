#include "launcher/hang/stack_collector.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <fstream>
#include <utility>

#include "launcher/hang/stack_text.hpp"
#include "launcher/workers/output_pump.hpp"
#include "launcher/workers/worker_env_builder.hpp"
#include "launcher/workers/worker_process.hpp"

namespace ddp {
namespace {

constexpr std::size_t kMaxGdbLines = 20000;

std::vector<std::string> gdbCommand(const std::string& gdb, pid_t pid) {
  return {gdb,   "-nx", "-batch", "-iex", "set debuginfod enabled off",
          "-ex", "set print frame-arguments none",
          "-ex", "set print address off",
          "-ex", "thread apply all bt",
          "-p",  std::to_string(pid)};
}

std::string joined(const std::deque<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

struct StackCollector::Job {
  SpawnedProcess proc;
  std::unique_ptr<OutputPump> out;
  std::unique_ptr<OutputPump> err;
  std::unique_ptr<boost::asio::steady_timer> bound;
  bool timedOut = false;
  Done done;
};

StackCollector::StackCollector(boost::asio::io_context& io, ChildReaper& reaper,
                               std::chrono::milliseconds bound)
    : io_(io), reaper_(reaper), bound_(bound) {}

StackCollector::~StackCollector() {
  for (auto& [guardian, job] : jobs_) {
    reaper_.forget(guardian);
    ::killpg(job->proc.pid, SIGKILL);
    while (::waitpid(guardian, nullptr, 0) < 0 && errno == EINTR) {
    }
    closeHandles(job->proc);
  }
}

void StackCollector::collectNative(pid_t pid, Done done) {
  const EnvMap env = currentEnvironment();
  const auto path = env.find("PATH");
  const std::string gdb =
      resolveProgram("gdb", path == env.end() ? "/usr/local/bin:/usr/bin:/bin" : path->second);
  if (gdb.empty()) {
    boost::asio::post(io_, [done, alive = std::weak_ptr<int>(alive_)] {
      if (alive.expired()) return;
      done("no stacks: gdb is not installed (Debian package gdb; scripts/setup.sh installs it)\n");
    });
    return;
  }
  auto job = std::make_unique<Job>();
  try {
    job->proc = spawnWorker(gdbCommand(gdb, pid), env);
  } catch (const std::exception& e) {
    const std::string why = e.what();
    boost::asio::post(io_, [done, why, alive = std::weak_ptr<int>(alive_)] {
      if (!alive.expired()) done("no stacks: " + why + "\n");
    });
    return;
  }
  const pid_t guardian = job->proc.guardianPid;
  job->done = std::move(done);
  StreamRoute keep;
  keep.tailLines = kMaxGdbLines;
  job->out = std::make_unique<OutputPump>(io_, std::exchange(job->proc.stdoutFd, -1), keep);
  keep.tailLines = 20;
  job->err = std::make_unique<OutputPump>(io_, std::exchange(job->proc.stderrFd, -1), keep);
  job->bound = std::make_unique<boost::asio::steady_timer>(io_, bound_);
  job->bound->async_wait([this, guardian, alive = std::weak_ptr<int>(alive_)](
                             const boost::system::error_code& ec) {
    if (ec || alive.expired()) return;  // a completion queued before the collector went
    auto it = jobs_.find(guardian);
    if (it == jobs_.end()) return;
    it->second->timedOut = true;
    ::killpg(it->second->proc.pid, SIGKILL);
  });
  reaper_.watch(guardian, [this](pid_t g, int) { finish(g); });
  job->out->start();
  job->err->start();
  jobs_.emplace(guardian, std::move(job));
}

void StackCollector::finish(pid_t guardian) {
  auto it = jobs_.find(guardian);
  if (it == jobs_.end()) return;
  std::unique_ptr<Job> job = std::move(it->second);
  jobs_.erase(it);
  job->bound->cancel();
  closeHandles(job->proc);
  job->out->finish();
  job->err->finish();
  std::string text = cleanGdbStacks(joined(job->out->tail()));
  if (text.find("\n#") == std::string::npos && text.rfind("#", 0) != 0) {
    text += joined(job->err->tail());  // no frames: say what gdb said
  }
  if (job->timedOut) {
    text += "(gdb was stopped after " + std::to_string(bound_.count()) + " ms; stacks may be cut)\n";
  }
  job->done(text);
}

RecordedStacks recordStacks(const std::string& path, const std::string& reason,
                            const std::string& stacks, bool pythonDump, std::size_t shownLines) {
  RecordedStacks out;
  std::ofstream file(path, std::ios::trunc);
  file << "# " << reason << "\n" << stacks;
  if (file.flush()) out.file = path;
  out.shown = trimStacks(pythonDump ? cleanPythonDump(stacks) : stacks, shownLines, out.file);
  out.waitsForPeer = waitsForPeer(stacks);
  return out;
}

bool abortForStacks(pid_t pid) {
  const struct rlimit noCore = {0, 0};
  ::prlimit(pid, RLIMIT_CORE, &noCore, nullptr);
  return ::kill(pid, SIGABRT) == 0;
}

}  // namespace ddp
