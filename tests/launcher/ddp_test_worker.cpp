// ddp_test_worker: a worker program for the launcher tests. Flags (any order):
//   --env-file PATH       write the environment (KEY=VALUE lines) to PATH.<LOCAL_RANK>
//   --ready-file PATH     after handlers are installed, create PATH.<RANK> holding the pid
//   --print N             print N numbered lines to stdout and to stderr
//   --fail-rank R         only global rank R fails (default: every rank that fails, fails)
//   --fail-until-attempt K  fail while TORCHELASTIC_RESTART_COUNT < K (default: always fail
//                          when --exit/--raise is given)
//   --exit CODE           fail by exiting with CODE
//   --raise SIG           fail by raising signal SIG
//   --error-message TEXT  before failing, write torch's @record error file with TEXT
//   --wait                (ranks not failing) block until a signal arrives; record it in
//   PATH.<RANK> of --signal-file
//                         and exit 128+signal
//   --signal-file PATH    where --wait records the signal name
//   --ignore-term         with --wait: ignore SIGTERM (tests the SIGKILL after the grace)
//   --ignore-int          with --wait: ignore SIGINT too
//   --linger-file PATH    with --wait: after the first signal, keep running (still recording
//                         signals) until PATH exists; the signal file then lists every signal
//                         received, space-separated
//   --exit-after-signal C with --wait: exit with C after the signal instead of 128+signal
//   --dispositions-file PATH  at start, write the SigIgn mask of /proc/self/status (hex) to
//                         PATH.<RANK>
//   --sleep-ms MS         sleep before exiting (succeeding ranks)
//   --fail-on-signal      with --wait: failing ranks too wait for a signal, then fail
//   --comm-error-rank R   when failing, rank R fails like a peer's victim instead: exit 3 with a
//                         "Connection reset by peer" error file
//   --abort-after-print TEXT  print TEXT and a newline with C stdio (printf), then abort(): what
//                         a crashing native worker leaves in stdio's buffer
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

extern char** environ;

namespace {

volatile sig_atomic_t gSignal = 0;
volatile sig_atomic_t gSeen[16];
volatile sig_atomic_t gSeenCount = 0;
void onSignal(int sig) {
  if (gSignal == 0) gSignal = sig;
  const int n = gSeenCount;
  if (n < 16) {
    gSeen[n] = sig;
    gSeenCount = n + 1;
  }
}

std::string seenSignals() {
  std::string out;
  for (int i = 0; i < gSeenCount; ++i) {
    out += (i > 0 ? " " : "") + std::string("SIG") + sigabbrev_np(gSeen[i]);
  }
  return out;
}

std::string ignoredMask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigIgn:", 0) == 0) return line.substr(line.find_first_not_of(" \t", 7));
  }
  return "";
}

int envInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atoi(v) : fallback;
}

void writeFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  { std::ofstream(tmp) << text; }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string envFile, readyFile, signalFile, errorMessage, lingerFile, dispositionsFile;
  std::string abortAfterPrint;
  int print = 0, failRank = -1, failUntil = -1, exitCode = 0, raiseSig = 0, sleepMs = 0;
  int exitAfterSignal = -1, commErrorRank = -1;
  bool wait = false, ignoreTerm = false, ignoreInt = false, failOnSignal = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--env-file")
      envFile = next();
    else if (a == "--ready-file")
      readyFile = next();
    else if (a == "--signal-file")
      signalFile = next();
    else if (a == "--error-message")
      errorMessage = next();
    else if (a == "--print")
      print = std::stoi(next());
    else if (a == "--fail-rank")
      failRank = std::stoi(next());
    else if (a == "--fail-until-attempt")
      failUntil = std::stoi(next());
    else if (a == "--exit")
      exitCode = std::stoi(next());
    else if (a == "--raise")
      raiseSig = std::stoi(next());
    else if (a == "--sleep-ms")
      sleepMs = std::stoi(next());
    else if (a == "--linger-file")
      lingerFile = next();
    else if (a == "--exit-after-signal")
      exitAfterSignal = std::stoi(next());
    else if (a == "--dispositions-file")
      dispositionsFile = next();
    else if (a == "--wait")
      wait = true;
    else if (a == "--ignore-term")
      ignoreTerm = true;
    else if (a == "--ignore-int")
      ignoreInt = true;
    else if (a == "--fail-on-signal")
      failOnSignal = true;
    else if (a == "--comm-error-rank")
      commErrorRank = std::stoi(next());
    else if (a == "--abort-after-print")
      abortAfterPrint = next();
  }
  if (!abortAfterPrint.empty()) {
    std::printf("%s\n", abortAfterPrint.c_str());
    std::abort();
  }
  const int rank = envInt("RANK", 0), localRank = envInt("LOCAL_RANK", 0);
  const int attempt = envInt("TORCHELASTIC_RESTART_COUNT", 0);
  if (!envFile.empty()) {
    std::string text;
    for (char** e = environ; *e != nullptr; ++e) text += std::string(*e) + "\n";
    writeFile(envFile + "." + std::to_string(localRank), text);
  }
  if (!dispositionsFile.empty()) {
    writeFile(dispositionsFile + "." + std::to_string(rank), ignoredMask());
  }
  for (int i = 0; i < print; ++i) {
    std::cout << "out " << rank << " line " << i << std::endl;
    std::cerr << "err " << rank << " line " << i << std::endl;
  }
  // Signals are blocked until sigsuspend(), so one arriving right after the ready file is never
  // lost between the check of gSignal and the wait.
  sigset_t waitMask, oldMask;
  sigemptyset(&waitMask);
  if (wait) {
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) {
      ::signal(sig, onSignal);
      sigaddset(&waitMask, sig);
    }
    if (ignoreTerm) ::signal(SIGTERM, SIG_IGN);
    if (ignoreInt) ::signal(SIGINT, SIG_IGN);
  }
  ::sigprocmask(SIG_BLOCK, &waitMask, &oldMask);
  if (!readyFile.empty())
    writeFile(readyFile + "." + std::to_string(rank), std::to_string(getpid()));
  const bool failing = (exitCode != 0 || raiseSig != 0) && (failRank < 0 || failRank == rank) &&
                       (failUntil < 0 || attempt < failUntil);
  if (failing && rank == commErrorRank) {
    exitCode = 3;
    raiseSig = 0;
    errorMessage = "ddp::CommError: allreduce failed: Connection reset by peer";
  }
  if (wait && (!failing || failOnSignal)) {
    while (gSignal == 0) ::sigsuspend(&oldMask);
  }
  ::sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  if (wait && !failing) {
    while (!lingerFile.empty() && !std::filesystem::exists(lingerFile)) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!signalFile.empty()) writeFile(signalFile + "." + std::to_string(rank), seenSignals());
    return exitAfterSignal >= 0 ? exitAfterSignal : 128 + gSignal;
  }
  if (failing) {
    const char* errorFile = std::getenv("TORCHELASTIC_ERROR_FILE");
    if (!errorMessage.empty() && errorFile != nullptr && *errorFile != '\0') {
      const bool typed = errorMessage.find(": ") != std::string::npos;
      writeFile(errorFile,
                "{\"message\": {\"message\": \"" + (typed ? "" : std::string("RuntimeError: ")) +
                    errorMessage +
                    "\", \"extraInfo\": {\"py_callstack\": \"Traceback: line 1\\nline 2\", "
                    "\"timestamp\": \"1700000000\"}}}");
    }
    std::cerr << "rank " << rank << " failing at attempt " << attempt << std::endl;
    if (raiseSig != 0) ::raise(raiseSig);
    return exitCode;
  }
  if (sleepMs > 0) std::this_thread::sleep_for(std::chrono::milliseconds(sleepMs));
  return 0;
}
