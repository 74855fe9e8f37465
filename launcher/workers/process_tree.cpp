#include "launcher/workers/process_tree.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

namespace ddp {
namespace {

// The record getdents64 returns (not declared by glibc's headers).
struct Dirent64 {
  unsigned long long ino;
  long long off;
  unsigned short reclen;
  unsigned char type;
  char name[1];
};

bool parsePid(const char* s, pid_t& out) {
  if (*s == '\0') return false;
  long value = 0;
  for (; *s != '\0'; ++s) {
    if (*s < '0' || *s > '9') return false;
    value = value * 10 + (*s - '0');
    if (value > 0x7fffffff) return false;
  }
  out = static_cast<pid_t>(value);
  return true;
}

// The parent pid in /proc/<name>/stat ("pid (comm) S ppid ..."), or -1. The command name may hold
// spaces and ')' but is at most 15 bytes, so the last ')' of the first 160 bytes closes it.
pid_t parentOf(int procFd, const char* name) {
  char path[32];
  const std::size_t len = std::strlen(name);
  if (len + sizeof("/stat") > sizeof(path)) return -1;
  std::memcpy(path, name, len);
  std::memcpy(path + len, "/stat", sizeof("/stat"));
  const int fd = ::openat(procFd, path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[160];
  ssize_t n;
  do {
    n = ::read(fd, buf, sizeof(buf) - 1);
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* close = std::strrchr(buf, ')');
  if (close == nullptr || close[1] != ' ' || close[2] == '\0' || close[3] != ' ') return -1;
  const char* p = close + 4;
  long ppid = 0;
  for (; *p >= '0' && *p <= '9'; ++p) ppid = ppid * 10 + (*p - '0');
  return *p == ' ' ? static_cast<pid_t>(ppid) : -1;
}

void killOne(pid_t child, void*) { ::kill(child, SIGKILL); }

}  // namespace

int forEachChild(pid_t parent, void (*fn)(pid_t child, void* ctx), void* ctx) {
  const int procFd = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (procFd < 0) return -1;
  alignas(8) char buf[4096];
  int visited = 0;
  for (;;) {
    const long n = ::syscall(SYS_getdents64, procFd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) visited = -1;
      break;
    }
    for (long off = 0; off < n;) {
      const auto* entry = reinterpret_cast<const Dirent64*>(buf + off);
      off += entry->reclen;
      pid_t pid;
      if (!parsePid(entry->name, pid)) continue;
      if (parentOf(procFd, entry->name) != parent) continue;
      fn(pid, ctx);
      ++visited;
    }
  }
  ::close(procFd);
  return visited;
}

void killAllDescendants() {
  const pid_t self = ::getpid();
  for (;;) {
    const int found = forEachChild(self, killOne, nullptr);
    // Wait for one of the killed to go (its own children are ours from then on); without /proc
    // (found < 0) all that is left is to wait for the children to end.
    pid_t r;
    do {
      r = ::waitpid(-1, nullptr, found != 0 ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r < 0) return;  // ECHILD: nothing is left below us
    while (::waitpid(-1, nullptr, WNOHANG) > 0) {
    }
  }
}

bool hasChildren() {
  siginfo_t info;
  std::memset(&info, 0, sizeof(info));
  int r;
  do {
    r = ::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
  } while (r < 0 && errno == EINTR);
  return !(r < 0 && errno == ECHILD);
}

}  // namespace ddp
